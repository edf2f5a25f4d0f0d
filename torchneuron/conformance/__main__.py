"""`python -m torchneuron.conformance`: the command line of cli.py."""

import sys

from torchneuron.conformance.cli import main

if __name__ == "__main__":
    sys.exit(main())
