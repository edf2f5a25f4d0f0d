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

Dtypes: float32, bfloat16, int64, float64, float16, complex64, uint16, uint32, uint64 and bool
by default; gradients are compared in float32. The unsigned types run even where an OpInfo does
not list them, and a sample that CPU refuses is skipped. An op that takes out= also writes into a
non-contiguous out= (out_arg.py). --modules adds module_db entries (`module:nn.Conv2d`),
--optimizers optim_db entries (`optim:Adam`). --shard K/N runs one of N slices; --merge combines
the slices' reports; --write-doc puts the record in docs/conformance.md.

OpInfo names with a variant are keyed `name.variant` (e.g. `max.reduction_with_dim`); `--ops name`
selects every variant of `name`.
"""

import argparse
import json
import sys
import time

from .opinfo import CI_OPS, DTYPES, all_ops, select_ops
from .reference import TOLERANCES
from .report import DOC_BEGIN, DOC_END, doc_record, markdown, regressions, totals, totals_by_dtype
from .upstream import write_between_markers
from .modules import CI_DTYPE, CI_MODULES, module_tasks
from .optimizers import CI_OPTIMIZERS, optim_tasks
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
    p.add_argument("--ci", action="store_true",
                   help="run the fixed CI subset: CI_OPS, and CI_MODULES and CI_OPTIMIZERS in float32")
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
    p.add_argument("--modules", action="store_true",
                   help="also run module_db (forward, backward, channels-last); with --ops, "
                        "names like nn.Conv2d or module:nn.Conv2d select modules")
    p.add_argument("--optimizers", action="store_true",
                   help="also run optim_db (steps and state); names like Adam or optim:Adam select")
    p.add_argument("--no-opinfo", action="store_true", help="run no OpInfo entries")
    p.add_argument("--no-out", action="store_true",
                   help="skip the out= check (an op that takes out= writing a non-contiguous one)")
    p.add_argument("--shard", help="K/N: run only every N-th selected op, starting at the K-th (1-based)")
    p.add_argument("--merge", nargs="+", metavar="JSON",
                   help="run nothing: combine these reports (e.g. shards) into one")
    p.add_argument("--write-doc", metavar="PAGE",
                   help="write the summary between the page's opinfo-record markers")
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


def _shard(keys, spec):
    """The K-th of N interleaved shards of `keys` (spec 'K/N', K from 1)."""
    if not spec:
        return keys
    k, _, n = spec.partition("/")
    k, n = int(k), int(n)
    if not 1 <= k <= n:
        raise SystemExit(f"conformance: --shard {spec!r} wants K/N with 1 <= K <= N")
    return keys[k - 1::n]


def _merged(paths):
    """(entries, elapsed, dtypes, grad, compile) of several reports run with the same options."""
    entries, elapsed, dtypes, flags = [], 0.0, [], None
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        entries += r["entries"]
        elapsed += r.get("elapsed_s", 0.0)
        dtypes += [d for d in r.get("dtypes", []) if d not in dtypes]
        flags = flags or (r.get("grad", True), r.get("compile", False))
    return entries, elapsed, dtypes, *(flags or (True, False))


def _run(args):
    """Runs the selected entries; returns (entries, elapsed, dtypes, grad, compile)."""
    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    for d in dtypes:
        if d not in TOLERANCES:
            raise SystemExit(f"conformance: unsupported dtype {d!r}; choose from {DTYPES}")
    names = _names(args)
    tasks = []
    if not args.no_opinfo:
        ops = all_ops(args.extra_ops)
        op_names = None if names is None else [n for n in names if n in ops or
                                                 any(o.name == n for o in ops.values())]
        if names is None or op_names:
            keys = _shard(select_ops(ops, op_names, args.limit), args.shard)
            tasks += [(k, d) for k in keys for d in dtypes]
        elif not (args.modules or args.optimizers):
            select_ops(ops, names)  # raises on the unknown names
    if args.modules:
        tasks += _shard(module_tasks(names, dtypes), args.shard)
    if args.optimizers:
        tasks += _shard(optim_tasks(names, dtypes), args.shard)
    if args.ci and CI_DTYPE in dtypes:  # the CI subset's modules and optimizers, float32 only
        ci = module_tasks(CI_MODULES, [CI_DTYPE]) + optim_tasks(CI_OPTIMIZERS, [CI_DTYPE])
        tasks += [t for t in _shard(ci, args.shard) if t not in tasks]
    start, counts = time.monotonic(), {}
    runner = OpInfoRunner(args.extra_ops, not args.no_grad, args.compile, not args.no_out)
    entries = run_tasks(tasks, args.jobs, args.timeout, on_result=_progress(counts), runner=runner)
    sys.stderr.write("\n")
    return entries, time.monotonic() - start, dtypes, not args.no_grad, args.compile


def main(argv=None):
    """Command-line entry point; returns the process exit code."""
    args = parse_args(argv)
    if args.check_regressions and not args.baseline:
        raise SystemExit("conformance: --check-regressions needs --baseline")
    entries, elapsed, dtypes, grad, compiled = _merged(args.merge) if args.merge else _run(args)
    report = {"totals": totals(entries), "by_dtype": totals_by_dtype(entries),
              "elapsed_s": round(elapsed, 1), "dtypes": dtypes, "grad": grad, "compile": compiled,
              "entries": entries}
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
    with open(args.markdown, "w") as f:
        f.write(markdown(entries, elapsed))
    if args.write_baseline:
        with open(args.write_baseline, "w") as f:
            json.dump({f"{e['op']}|{e['dtype']}": e["status"] for e in entries}, f, indent=1,
                      sort_keys=True)
    if args.write_doc:
        write_between_markers(args.write_doc, doc_record(entries, elapsed), DOC_BEGIN, DOC_END)
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
