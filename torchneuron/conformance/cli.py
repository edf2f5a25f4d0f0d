"""OpInfo conformance sweep: runs PyTorch's OpInfo samples on CPU and on `neuron` and compares them.

Usage:
    python -m torchneuron.conformance --ci --jobs 2
    python -m torchneuron.conformance --ops add,abs,sum --dtype float32 --no-grad
    python -m torchneuron.conformance --ci --baseline tests/python/conformance_baseline.json \
        --check-regressions

Each (OpInfo, dtype) entry is run in a spawned worker process (never fork: the device runtime does
not survive a fork), so a hang (`--timeout` seconds per sample) or a crash is recorded as an error
and the worker is replaced. An entry's status is one of pass | mismatch | error | skipped.

Placement: around the neuron run the fallback counters are reset and read back, so `fallback` lists
every ATen op (with calls) that fell back to the CPU. `native` lists the ATen ops that a
TorchDispatchMode saw during the neuron run and that have a PrivateUse1 registration and did not
fall back. "Native share" in the summary is the share of run entries (pass or mismatch) whose
neuron run had zero fallbacks; it says nothing about how much of the work ran natively otherwise.

OpInfo names with a variant are keyed `name.variant` (e.g. `max.reduction_with_dim`); `--ops name`
selects every variant of `name`.
"""

import argparse
import json
import sys
import time

from .opinfo import CI_OPS, DTYPES, all_ops, select_ops
from .reference import TOLERANCES
from .report import markdown, regressions, totals
from .samples import OpInfoRunner
from .workers import run_tasks


def _progress(counts):
    """Returns an on_result callback that prints a progress line to stderr."""
    tty = sys.stderr.isatty()

    def show(record, done, total):
        """Prints one progress line."""
        counts[record["status"]] = counts.get(record["status"], 0) + 1
        width = len(str(total))
        line = (f"[{done:>{width}}/{total}] {record['op'][:32]:<32} {record['dtype']:<8} "
                f"pass={counts.get('pass', 0)} mismatch={counts.get('mismatch', 0)} "
                f"error={counts.get('error', 0)} skipped={counts.get('skipped', 0)}")
        sys.stderr.write(("\r" + line + "\x1b[K") if tty else line + "\n")
        sys.stderr.flush()
    return show


def parse_args(argv=None):
    """Parses the command line."""
    p = argparse.ArgumentParser(prog="python -m torchneuron.conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", help="comma-separated OpInfo names")
    p.add_argument("--ops-file", help="file with OpInfo names, one a line (# comments)")
    p.add_argument("--ci", action="store_true", help="run the fixed CI_OPS subset")
    p.add_argument("--dtype", default=",".join(DTYPES), help="comma-separated dtypes")
    p.add_argument("--no-grad", action="store_true", help="skip the autograd comparison")
    p.add_argument("--compile", action="store_true",
                   help="run each sample through torch.compile(backend='neuron') (slow: one compile per sample)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds per sample (per entry for work outside the samples)")
    p.add_argument("--limit", type=int, help="run only the first N ops")
    p.add_argument("--output", default="conformance.json", help="JSON report path")
    p.add_argument("--markdown", default="conformance.md", help="Markdown summary path")
    p.add_argument("--baseline", help="baseline JSON {op|dtype: status}")
    p.add_argument("--check-regressions", action="store_true",
                   help="exit 1 when a baseline pass no longer passes")
    p.add_argument("--write-baseline", help="also write {op|dtype: status} to this path")
    p.add_argument("--extra-ops", help=argparse.SUPPRESS)  # module:attr with OpInfo-like test ops
    return p.parse_args(argv)


def _names(args):
    """Returns the requested OpInfo names, or None for all of op_db."""
    names = []
    if args.ci:
        names += CI_OPS
    if args.ops:
        names += [n.strip() for n in args.ops.split(",") if n.strip()]
    if args.ops_file:
        with open(args.ops_file) as f:
            names += [ln.split("#")[0].strip() for ln in f if ln.split("#")[0].strip()]
    return names or None


def main(argv=None):
    """Command-line entry point; returns the process exit code."""
    args = parse_args(argv)
    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    for d in dtypes:
        if d not in TOLERANCES:
            raise SystemExit(f"conformance: unsupported dtype {d!r}; choose from {DTYPES}")
    if args.check_regressions and not args.baseline:
        raise SystemExit("conformance: --check-regressions needs --baseline")
    keys = select_ops(all_ops(args.extra_ops), _names(args), args.limit)
    tasks = [(k, d) for k in keys for d in dtypes]
    start, counts = time.monotonic(), {}
    runner = OpInfoRunner(args.extra_ops, not args.no_grad, args.compile)
    entries = run_tasks(tasks, args.jobs, args.timeout, on_result=_progress(counts), runner=runner)
    elapsed = time.monotonic() - start
    sys.stderr.write("\n")
    report = {"totals": totals(entries), "elapsed_s": round(elapsed, 1), "dtypes": dtypes,
              "grad": not args.no_grad, "compile": args.compile, "entries": entries}
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
    with open(args.markdown, "w") as f:
        f.write(markdown(entries, elapsed))
    if args.write_baseline:
        with open(args.write_baseline, "w") as f:
            json.dump({f"{e['op']}|{e['dtype']}": e["status"] for e in entries}, f, indent=1,
                      sort_keys=True)
    t = report["totals"]
    print(f"conformance: {t['total']} entries in {elapsed:.1f} s: pass={t['pass']} "
          f"mismatch={t['mismatch']} error={t['error']} skipped={t['skipped']} "
          f"-> {args.output}, {args.markdown}")
    if args.check_regressions:
        with open(args.baseline) as f:
            lost = regressions(entries, json.load(f))
        for line in lost:
            print("REGRESSION " + line)
        if lost:
            return 1
    return 0
