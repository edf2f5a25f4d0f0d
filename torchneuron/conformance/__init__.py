"""The OpInfo conformance tool, `python -m torchneuron.conformance` (its usage: cli.py): PyTorch's
OpInfo samples run on CPU and on `neuron` and compared. In the order a run goes through them:
opinfo.py (the entries and the names a run selects), workers.py (the spawned worker processes),
samples.py (one entry's samples on both devices), out_arg.py (the out= check), reference.py (the
comparison with the CPU and the float64 reference), suites.py with modules.py and optimizers.py
(module_db and optim_db entries), report.py (totals, Markdown, regressions, the docs record) and
cli.py."""

from .cli import main, parse_args
from .opinfo import CI_OPS, DTYPES, MAX_SAMPLES, NONDETERMINISTIC, all_ops, op_key, select_ops
from .reference import FLOAT64_ARBITRATED, TOLERANCES, _Float64Reference, compare, max_abs_error
from .report import markdown, regressions, top_fallbacks, totals
from .samples import OpInfoRunner, _host_leaves, _meta_probes, run_entry
from .workers import heartbeat, run_tasks
