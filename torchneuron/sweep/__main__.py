"""`python -m torchneuron.sweep`: the command line of cli.py."""

import sys

from torchneuron.sweep.cli import main

if __name__ == "__main__":
    sys.exit(main())
