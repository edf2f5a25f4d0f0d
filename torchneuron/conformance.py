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
import faulthandler
import importlib
import itertools
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import traceback
import types
from multiprocessing.connection import wait as mp_wait

DTYPES = ("float32", "bfloat16", "int64")
TOLERANCES = {"float32": (1e-5, 1.3e-6), "bfloat16": (1e-2, 1.6e-2), "int64": (0.0, 0.0)}
MAX_SAMPLES = 8
# Random ops: CPU and device generators differ, so values cannot be compared.
NONDETERMINISTIC = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "normal", "uniform",
    "multinomial", "rand_like", "randint_like", "randn_like", "empty", "empty_like",
    "empty_strided", "new_empty", "new_empty_strided", "empty_permuted", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout", "nn.functional.rrelu", "randint", "randn", "rand",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d", "svd_lowrank",
    "pca_lowrank",
}

CI_OPS = (
    # pointwise unary
    "abs", "neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "floor",
    "ceil", "sign", "reciprocal", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    # pointwise binary / ternary
    "add", "sub", "mul", "div.no_rounding_mode", "pow", "maximum", "minimum", "eq", "lt", "ge",
    "where", "clamp", "atan2", "remainder", "lerp",
    # reductions
    "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "max.reduction_with_dim", "var",
    "std", "logsumexp", "cumsum", "all", "any",
    # matmul family
    "mm", "bmm", "matmul", "addmm", "mv", "dot", "nn.functional.linear", "einsum",
    # indexing
    "index_select", "gather", "scatter", "index_add", "masked_fill", "take", "__getitem__",
    "index_put", "nn.functional.embedding",
    # shape
    "reshape", "view", "permute", "transpose", "cat", "stack", "squeeze", "unsqueeze", "flatten",
    "expand", "narrow", "split", "t", "flip", "roll", "tril", "triu", "contiguous", "clone",
    # softmax / norm
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.normalize",
    "nn.functional.cross_entropy",
    # factory-like
    "zeros_like", "ones_like", "full_like", "arange", "new_zeros", "new_full", "fill",
)

_OP_CACHE = {}


def _import_op_db():
    """Imports OpInfo's op_db, stubbing `expecttest` (a test-only dependency) when it is missing."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = type("TestCase", (), {})
        sys.modules["expecttest"] = stub
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def op_key(op):
    """Returns the entry name of an OpInfo: `name` or `name.variant_test_name`."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def all_ops(extra=None):
    """Returns {entry name: OpInfo} for op_db plus the ops from an optional `module:attr` spec."""
    if extra in _OP_CACHE:
        return _OP_CACHE[extra]
    ops = {}
    for op in _import_op_db():
        ops.setdefault(op_key(op), op)
    if extra:
        mod, _, attr = extra.partition(":")
        for op in getattr(importlib.import_module(mod), attr or "OPS"):
            ops[op_key(op)] = op
    _OP_CACHE[extra] = ops
    return ops


def select_ops(ops, names=None, limit=None):
    """Returns the entry names to run: those matching `names` (exact or base name), first `limit`."""
    keys = list(ops)
    if names:
        wanted = []
        for name in names:
            hits = [k for k in keys if k == name] or [k for k in keys if ops[k].name == name]
            if not hits:
                raise SystemExit(f"conformance: unknown OpInfo name {name!r}")
            wanted.extend(h for h in hits if h not in wanted)
        keys = wanted
    return keys[:limit] if limit else keys


def _to_device(tree, device, requires_grad=False, host_leaves=frozenset()):
    """Copies every tensor in a nested list/tuple/dict to `device`, keeping requires_grad leaves;
    the leaves whose flattened positions are in `host_leaves` are copied on the CPU instead."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    def move(index, x):
        """Copies one leaf."""
        if not isinstance(x, torch.Tensor):
            return x
        y = x.detach().to("cpu" if index in host_leaves else device, copy=True)
        if requires_grad and x.requires_grad and (y.is_floating_point() or y.is_complex()):
            y.requires_grad_(True)
        return y
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([move(i, x) for i, x in enumerate(leaves)], spec)


def _host_leaves(sample, probe):
    """Positions of the (input, args, kwargs) leaves an OpInfo keeps on the CPU whatever the
    device (tensor_split's index tensor): those that are CPU tensors in `probe`, the same
    sample generated for the meta device. Empty when the two do not line up."""
    import torch
    from torch.utils._pytree import tree_flatten
    if probe is None:
        return frozenset()
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    probe_leaves, probe_spec = tree_flatten((probe.input, probe.args, probe.kwargs))
    if spec != probe_spec:
        return frozenset()
    return frozenset(i for i, (x, p) in enumerate(zip(leaves, probe_leaves))
                     if isinstance(x, torch.Tensor) and isinstance(p, torch.Tensor) and p.device.type == "cpu")


def _leaves(tree):
    """Returns the tensor leaves of a nested output."""
    import torch
    from torch.utils._pytree import tree_leaves
    return [x for x in tree_leaves(tree) if isinstance(x, torch.Tensor)]


def max_abs_error(actual, expected):
    """Returns the largest finite absolute difference between matching tensor leaves (or None)."""
    import torch
    worst = None
    for a, e in zip(_leaves(actual), _leaves(expected)):
        if a.shape != e.shape or a.numel() == 0:
            continue
        if a.is_complex() or e.is_complex():
            a, e = torch.view_as_real(a.resolve_conj()), torch.view_as_real(e.resolve_conj())
        diff = (a.double() - e.double()).abs()
        diff = diff[torch.isfinite(diff)]
        if diff.numel():
            worst = max(worst or 0.0, diff.max().item())
    return worst


def _output_tolerances(expected, dtype):
    """(atol, rtol) for the loosest dtype among the reference's outputs: an int64 sample of an
    op with float outputs (cos, atan2) is compared as float32, not exactly."""
    import torch
    by_dtype = {torch.float32: TOLERANCES["float32"], torch.bfloat16: TOLERANCES["bfloat16"],
                torch.float16: (1e-3, 1e-3), torch.float64: (1e-7, 1e-7),
                torch.complex64: TOLERANCES["float32"], torch.complex128: (1e-7, 1e-7)}
    found = [by_dtype[t.dtype] for t in _leaves(expected) if t.dtype in by_dtype]
    if not found:
        return TOLERANCES.get(dtype, (1e-5, 1.3e-6))
    return max(a for a, _ in found), max(r for _, r in found)


def compare(actual, expected, dtype):
    """Compares a device result (already on CPU) with the CPU one; returns None or an error string."""
    import torch
    atol, rtol = _output_tolerances(expected, dtype)
    try:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True,
                                   check_device=False)
    except (AssertionError, TypeError, ValueError, RuntimeError) as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


def _grads(op, sample, device, call=None, host_leaves=frozenset()):
    """Runs op (through `call`, default op itself) on `device` copies of sample and returns
    (output, grads of the sum of float outputs)."""
    import torch
    inp, args, kwargs = _to_device((sample.input, sample.args, sample.kwargs), device, True, host_leaves)
    out = (call or op)(inp, *args, **kwargs)
    leaves = [x for x in _leaves((inp, args, kwargs)) if x.requires_grad]
    outs = [o for o in _leaves(out) if o.requires_grad and o.grad_fn is not None]
    if not leaves or not outs:
        return out, None
    loss = sum(o.float().sum() for o in outs)
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return out, [g if g is None else g.detach() for g in grads]


class _Placement:
    """Collects which ATen ops ran natively or fell back while active. Without `track_native`
    (compile mode: Dynamo does not trace under a dispatch mode) it counts fallbacks only."""

    def __init__(self, track_native=True):
        import torchneuron
        from torch.utils._python_dispatch import TorchDispatchMode
        self.tn = torchneuron
        self.native_regs = set(torchneuron.native_ops())
        self.seen = set()
        self.fallback = {}
        seen = self.seen

        class _Seen(TorchDispatchMode):
            def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
                seen.add("aten::" + func.name().split("::")[-1])
                return func(*args, **(kwargs or {}))
        self.mode = _Seen() if track_native else None

    def __enter__(self):
        self.tn.reset_fallback_report()
        if self.mode is not None:
            self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self.mode is not None:
            self.mode.__exit__(*exc)
        for name, calls in self.tn.fallback_report().items():
            self.fallback[name] = self.fallback.get(name, 0) + calls
        return False

    def native(self):
        """Returns sorted ops seen in dispatch that have a neuron registration and never fell back."""
        return sorted(n for n in self.seen if n in self.native_regs and n not in self.fallback)


def _draws_random_numbers(op, sample):
    """True for samples that ask for dropout: attention's dropout_p, or training-mode attention
    and dropout ops (batch norm's training mode is deterministic and still compared)."""
    kwargs = sample.kwargs or {}
    if float(kwargs.get("dropout_p", 0.0) or 0.0) > 0.0:
        return True
    return kwargs.get("training") is True and ("dropout" in op.name or "attention" in op.name)


def _compiled(op):
    """op through torch.compile(backend="neuron"), with Dynamo's caches reset so that every
    sample compiles afresh (one wrapper serves many samples)."""
    import torch
    import torchneuron
    torch._dynamo.reset()
    before = torchneuron.compile_stats()
    # The OpInfo's function itself: Dynamo does not trace into torch.testing's OpInfo.__call__.
    target = op.op
    compiled = torch.compile(lambda inp, *args, **kwargs: target(inp, *args, **kwargs), backend="neuron")

    def call(inp, *args, **kwargs):
        out = compiled(inp, *args, **kwargs)
        # A sample may give no graph at all (a view of its input needs no compiled code).
        if torchneuron.compile_stats()["graphs_eager"] != before["graphs_eager"]:
            raise RuntimeError("the neuron compiler rejected the graph and ran it eagerly")
        return out
    return call


def _run_sample(op, sample, dtype, grad, place, compile_mode=False, host_leaves=frozenset()):
    """Runs one sample; returns ('pass'|'mismatch'|'error'|'skipped', detail, max_abs_err).
    With compile_mode the device run goes through torch.compile(backend="neuron"); the leaves in
    host_leaves (see _host_leaves) stay on the CPU for the device run."""
    import torch
    from torch.utils._pytree import tree_map
    to_cpu = (lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x)
    if _draws_random_numbers(op, sample):
        return "skipped", "sample uses dropout: CPU and device generators differ", None
    try:
        if grad:
            exp_out, exp_grads = _grads(op, sample, "cpu")
        else:
            inp, args, kwargs = _to_device((sample.input, sample.args, sample.kwargs), "cpu")
            exp_out, exp_grads = op(inp, *args, **kwargs), None
    except Exception as exc:  # noqa: BLE001
        return "skipped", f"CPU reference raised {type(exc).__name__}", None
    try:
        with place:
            call = _compiled(op) if compile_mode else op
            if grad:
                out, grads = _grads(op, sample, "neuron", call, host_leaves)
            else:
                inp, args, kwargs = _to_device((sample.input, sample.args, sample.kwargs), "neuron",
                                               host_leaves=host_leaves)
                out, grads = call(inp, *args, **kwargs), None
            out, grads = tree_map(to_cpu, out), tree_map(to_cpu, grads)
    except Exception as exc:  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return "error", f"{type(exc).__name__}: {first}", None
    exp_out = tree_map(to_cpu, exp_out)
    reference = _Float64Reference(op, sample, grad, dtype)
    arbitrated = False
    why = compare(out, exp_out, dtype)
    if why is not None:
        if not reference.matches(out, exp_out, "out"):
            return "mismatch", why, max_abs_error(out, exp_out)
        arbitrated = True
    if grad and exp_grads is not None:
        why = compare(grads, exp_grads, dtype)
        if why is not None:
            if not reference.matches(grads, exp_grads, "grads"):
                return "mismatch", "grad: " + why, max_abs_error(grads, exp_grads)
            arbitrated = True
    return "pass", FLOAT64_ARBITRATED if arbitrated else "", None


FLOAT64_ARBITRATED = "differs from CPU, matches the float64 reference"


class _Float64Reference:
    """Arbitrates a floating sample (or an int64 one with floating outputs) the device and CPU
    disagree on: the op run on CPU in float64, rounded to the CPU result's dtypes. A device result within the usual tolerance of it passes,
    since then the CPU result is the less accurate one (a one-element layer norm's weight
    gradient is exactly 0; CPU float32 gives 2.4e-5). So does one that, at every element, is
    no further from the float64 result than CPU's is, give or take the tolerance: where both
    lose digits (bfloat16 torch.gradient's differences of close values, which compiled code
    rounds once where CPU rounds every step) the device is at least as accurate as CPU."""

    def __init__(self, op, sample, grad, dtype):
        self.op, self.sample, self.grad, self.dtype = op, sample, grad, dtype
        self.results = None

    def _run(self):
        """Returns {"out": ..., "grads": ...} in float64, or None if the op refuses float64."""
        import types
        import torch
        from torch.utils._pytree import tree_map
        # An int64 sample is widened too: it only comes here for floating outputs, which its ops
        # compute by promoting the integers (hfft2 of integers).
        widen_ints = self.dtype == "int64"
        widen = (lambda x: x.double() if isinstance(x, torch.Tensor) and (
            x.is_floating_point() or (widen_ints and not x.is_complex() and x.dtype != torch.bool)) else x)
        s = self.sample
        wide = types.SimpleNamespace(input=tree_map(widen, s.input), args=tree_map(widen, s.args),
                                     kwargs=tree_map(widen, s.kwargs))
        try:
            if self.grad:
                out, grads = _grads(self.op, wide, "cpu")
            else:
                inp, args, kwargs = _to_device((wide.input, wide.args, wide.kwargs), "cpu")
                out, grads = self.op(inp, *args, **kwargs), None
        except Exception:  # noqa: BLE001 - an op without float64 support keeps the mismatch
            return None
        return {"out": out, "grads": grads}

    def matches(self, actual, expected, part):
        """True if `actual` (the device's out or grads) is within tolerance of the float64 result."""
        import torch
        from torch.utils._pytree import tree_flatten, tree_unflatten
        if self.dtype not in ("float32", "bfloat16", "int64"):
            return False
        if self.dtype == "int64" and not all(
                isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) for t in tree_flatten(expected)[0]):
            return False
        if self.results is None:
            self.results = self._run() or {}
        ref = self.results.get(part)
        if ref is None:
            return False
        ref_leaves, _ = tree_flatten(ref)
        like_leaves, spec = tree_flatten(expected)
        if len(ref_leaves) != len(like_leaves):
            return False
        rounded = [r.detach().to(e.dtype) if isinstance(r, torch.Tensor) and isinstance(e, torch.Tensor)
                   and r.is_floating_point() and e.is_floating_point() else r
                   for r, e in zip(ref_leaves, like_leaves)]
        if compare(actual, tree_unflatten(rounded, spec), self.dtype) is None:
            return True
        actual_leaves, _ = tree_flatten(actual)
        return len(actual_leaves) == len(ref_leaves) and all(
            self._no_less_accurate(a, e, r) for a, e, r in zip(actual_leaves, like_leaves, ref_leaves))

    def _no_less_accurate(self, actual, expected, ref):
        """Whether `actual` is at each element as close to the float64 `ref` as the CPU's
        `expected`, within the dtype's tolerance, with NaNs where CPU has them."""
        import torch
        if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (actual, expected, ref)):
            return False
        if actual.shape != expected.shape or actual.shape != ref.shape:
            return False
        a, e, r = actual.detach().cpu().double(), expected.detach().cpu().double(), ref.detach().cpu().double()
        if not torch.equal(a.isnan(), e.isnan()):
            return False
        atol, rtol = _output_tolerances(expected, self.dtype)
        close = (a - r).abs() <= (e - r).abs() + atol + rtol * r.abs()
        return bool((close | (a == r) | a.isnan()).all())


def _merge(entry, status, detail, err):
    """Folds one sample's result into an entry: error > mismatch > pass > skipped."""
    rank = {"skipped": 0, "pass": 1, "mismatch": 2, "error": 3}
    if rank[status] > rank[entry["status"]]:
        entry["status"], entry["detail"] = status, detail
    if status == "mismatch" and err is not None:
        entry["max_abs_err"] = max(entry.get("max_abs_err") or 0.0, err)
    if status == "skipped" and not entry["detail"]:
        entry["detail"] = detail


def _meta_probes(op, dtype, requires_grad, count):
    """The op's first `count` samples generated for the meta device (None each where that fails
    or gives another count), to find the tensors an OpInfo keeps on the CPU."""
    import torch
    try:
        torch.manual_seed(0)
        probes = list(itertools.islice(op.sample_inputs("meta", dtype, requires_grad=requires_grad), count))
    except Exception:  # noqa: BLE001 - data-dependent sample code cannot run on meta tensors
        probes = []
    return probes if len(probes) == count else [None] * count


def run_entry(op, dtype_name, grad=True, max_samples=MAX_SAMPLES, compile_mode=False):
    """Runs one (OpInfo, dtype) entry in this process and returns its record."""
    import torch
    dtype = getattr(torch, dtype_name)
    entry = {"op": op_key(op), "dtype": dtype_name, "status": "skipped", "detail": "",
             "max_abs_err": None, "samples": 0, "float64_arbitrated": 0, "fallback": {},
             "native": []}
    if op.name in NONDETERMINISTIC:
        entry["detail"] = "random op (values not comparable)"
        return entry
    if dtype not in op.supported_dtypes("cpu"):
        entry["detail"] = "dtype not supported on CPU"
        return entry
    place = _Placement(track_native=not compile_mode)
    phases = [False] + ([True] if grad and dtype_name == "float32" and op.supports_autograd else [])
    for with_grad in phases:
        torch.manual_seed(0)
        try:
            samples = list(itertools.islice(
                op.sample_inputs("cpu", dtype, requires_grad=with_grad), max_samples))
        except Exception as exc:  # noqa: BLE001
            _merge(entry, "skipped", f"sample generation raised {type(exc).__name__}", None)
            continue
        probes = _meta_probes(op, dtype, with_grad, len(samples))
        for sample, probe in zip(samples, probes):
            heartbeat()
            status, detail, err = _run_sample(op, sample, dtype_name, with_grad, place, compile_mode,
                                              _host_leaves(sample, probe))
            entry["samples"] += status != "skipped"
            entry["float64_arbitrated"] += detail == FLOAT64_ARBITRATED
            _merge(entry, status, detail, err)
    if entry["status"] == "skipped" and not entry["detail"]:
        entry["detail"] = "no samples"
    if entry["status"] in ("pass", "mismatch", "error"):
        entry["detail"] = entry["detail"] if entry["status"] != "pass" else ""
    entry["fallback"], entry["native"] = dict(sorted(place.fallback.items())), place.native()
    return entry


class OpInfoRunner:
    """Runs (op key, dtype) tasks in a worker: the conformance tool's task runner for run_tasks."""

    def __init__(self, extra=None, grad=True, compile_mode=False):
        self.extra, self.grad, self.compile_mode, self.ops = extra, grad, compile_mode, None

    def setup(self):
        """Prepares a fresh worker process: quiet fallbacks, OpInfo database loaded."""
        import warnings
        import torchneuron
        warnings.simplefilter("ignore")
        torchneuron.set_fallback_mode("silent")
        self.ops = all_ops(self.extra)

    def run(self, task):
        """Runs one task and returns its record."""
        key, dtype = task
        return run_entry(self.ops[key], dtype, self.grad, compile_mode=self.compile_mode)

    def failed(self, task, detail, trace=None):
        """Returns the error record of a task that raised, timed out or killed its worker."""
        record = {"op": task[0], "dtype": task[1], "status": "error", "detail": detail,
                  "max_abs_err": None, "samples": 0, "float64_arbitrated": 0, "fallback": {},
                  "native": []}
        if trace:
            record["trace"] = trace
        return record


_HEARTBEAT = None


def heartbeat():
    """Tells the parent a unit of work (one sample) started, restarting its timeout."""
    if _HEARTBEAT is not None:
        _HEARTBEAT()


def _worker(conn, runner, crash_log):
    """Worker loop: receives tasks over `conn` and sends back `runner`'s records. A fatal signal
    (a crash in native code) writes every thread's Python stack to `crash_log`, which the parent
    puts in the task's record."""
    global _HEARTBEAT
    _HEARTBEAT = lambda: conn.send("beat")  # noqa: E731
    faulthandler.enable(open(crash_log, "w"), all_threads=True)  # noqa: SIM115 - open until the process ends
    runner.setup()
    conn.send("ready")
    while True:
        task = conn.recv()
        if task is None:
            return
        try:
            entry = runner.run(task)
        except BaseException as exc:  # noqa: BLE001
            entry = runner.failed(task, f"{type(exc).__name__}: {str(exc)[:300]} (in harness)",
                                  traceback.format_exc()[-2000:])
        conn.send(entry)


class _Slot:
    """One worker process with its pipe, the task it runs and that task's deadline."""

    def __init__(self, ctx, runner):
        self.conn, child = ctx.Pipe()
        handle, self.crash_log = tempfile.mkstemp(prefix="torchneuron-conformance-", suffix=".log")
        os.close(handle)
        self.proc = ctx.Process(target=_worker, args=(child, runner, self.crash_log), daemon=True)
        self.proc.start()
        child.close()
        self.task, self.deadline, self.ready = None, None, False

    def crash_report(self):
        """What the worker's fault handler wrote (empty unless it died of a fatal signal)."""
        try:
            with open(self.crash_log, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def kill(self):
        """Ends the worker process."""
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()
        try:
            os.unlink(self.crash_log)
        except OSError:
            pass


def run_tasks(tasks, jobs=1, timeout=60.0, grad=True, extra=None, on_result=None, runner=None):
    """Runs tasks in `jobs` spawned workers; returns their records in task order.

    `runner` (picklable; default OpInfoRunner(extra, grad)) has setup(), run(task) -> record and
    failed(task, detail, trace=None) -> record. A task that times out or kills its worker gets
    failed()'s record and the worker is replaced; on_result(record, done, total) sees each record.
    """
    runner = runner if runner is not None else OpInfoRunner(extra, grad)
    ctx = mp.get_context("spawn")
    pending, results = list(enumerate(tasks)), {}
    slots = [_Slot(ctx, runner) for _ in range(max(1, min(jobs, len(tasks))))]
    startup = 300.0
    for slot in slots:
        slot.deadline = time.monotonic() + startup
    try:
        while len(results) < len(tasks):
            for i, slot in enumerate(slots):
                if slot.ready and slot.task is None and pending:
                    slot.task = pending.pop(0)
                    slot.deadline = time.monotonic() + timeout
                    slot.conn.send(slot.task[1])
            now = time.monotonic()
            ready = mp_wait([s.conn for s in slots] + [s.proc.sentinel for s in slots],
                            timeout=max(0.05, min(s.deadline for s in slots) - now))
            for i, slot in enumerate(slots):
                record = None
                if slot.conn in ready:
                    try:
                        msg = slot.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg == "ready":
                        slot.ready = True
                        continue
                    if msg == "beat":  # a new sample started: its own timeout begins
                        slot.deadline = time.monotonic() + timeout
                        continue
                    record = msg
                if record is None and slot.proc.sentinel not in ready and \
                        time.monotonic() < slot.deadline:
                    continue
                task = slot.task
                if record is None:
                    dead = not slot.proc.is_alive() or slot.proc.sentinel in ready
                    if dead:
                        slot.proc.join(5)  # reap it, so exitcode is known
                    why = (f"worker died (exit code {slot.proc.exitcode})" if dead
                           else f"timeout after {timeout:g} s")
                    crash = slot.crash_report() if dead else ""
                    slot.kill()
                    slots[i] = _Slot(ctx, runner)
                    slots[i].deadline = time.monotonic() + startup
                    if task is None:
                        raise RuntimeError(f"worker failed to start: {why}" + (f"\n{crash}" if crash else ""))
                    record = runner.failed(task[1], why, crash or None)
                else:
                    slot.task, slot.deadline = None, time.monotonic() + 1e9
                results[task[0]] = record
                if on_result:
                    on_result(record, len(results), len(tasks))
    finally:
        for slot in slots:
            try:
                slot.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
            slot.kill()
    return [results[i] for i in range(len(tasks))]


def totals(entries):
    """Returns counts by status plus pass rate and zero-fallback share of run entries."""
    counts = {s: 0 for s in ("pass", "mismatch", "error", "skipped")}
    for e in entries:
        counts[e["status"]] += 1
    ran = [e for e in entries if e["status"] in ("pass", "mismatch")]
    tested = len(entries) - counts["skipped"]
    counts["total"] = len(entries)
    counts["pass_rate"] = round(counts["pass"] / tested, 4) if tested else None
    counts["zero_fallback_share"] = (
        round(sum(not e["fallback"] for e in ran) / len(ran), 4) if ran else None)
    return counts


def top_fallbacks(entries, n=20):
    """Returns [(aten op, entries using it, calls)] for the n most frequent fallback ops."""
    agg = {}
    for e in entries:
        for name, calls in e.get("fallback", {}).items():
            k, c = agg.get(name, (0, 0))
            agg[name] = (k + 1, c + calls)
    return sorted(((k, v[0], v[1]) for k, v in agg.items()), key=lambda r: (-r[1], -r[2], r[0]))[:n]


def markdown(entries, elapsed=None):
    """Returns the Markdown summary of a run."""
    t = totals(entries)
    lines = ["# torchneuron OpInfo conformance", ""]
    if elapsed is not None:
        lines += [f"Run time: {elapsed:.1f} s", ""]
    lines += ["| status | entries |", "| --- | --- |"]
    lines += [f"| {s} | {t[s]} |" for s in ("pass", "mismatch", "error", "skipped", "total")]
    rate = "n/a" if t["pass_rate"] is None else f"{100 * t['pass_rate']:.1f}%"
    share = "n/a" if t["zero_fallback_share"] is None else f"{100 * t['zero_fallback_share']:.1f}%"
    arbitrated = [e for e in entries if e.get("float64_arbitrated") and e["status"] == "pass"]
    lines += ["", f"Pass rate (of entries not skipped): {rate}",
              f"Native share (entries that ran, pass or mismatch, with zero CPU fallbacks): {share}",
              f"Entries passed on a float64 reference (device and CPU differ, the device matches "
              f"float64): {len(arbitrated)}"
              + (" (" + ", ".join(f"{e['op']} {e['dtype']}" for e in arbitrated[:10]) + ")"
                 if arbitrated else ""),
              "", "## Most frequent fallback ops", "", "| aten op | entries | calls |",
              "| --- | --- | --- |"]
    lines += [f"| `{n}` | {k} | {c} |" for n, k, c in top_fallbacks(entries)]
    bad = [e for e in entries if e["status"] in ("mismatch", "error")]
    bad.sort(key=lambda e: (e["status"] != "mismatch", -(e.get("max_abs_err") or 0.0), e["op"]))
    lines += ["", "## Worst mismatches and errors", "", "| op | dtype | status | max abs err | detail |",
              "| --- | --- | --- | --- | --- |"]
    for e in bad[:20]:
        err = "" if e.get("max_abs_err") is None else f"{e['max_abs_err']:.3g}"
        detail = e["detail"].replace("|", "\\|")[:160]
        lines.append(f"| {e['op']} | {e['dtype']} | {e['status']} | {err} | {detail} |")
    return "\n".join(lines) + "\n"


def regressions(entries, baseline):
    """Returns ['op|dtype: was pass, now X'] for baseline passes that no longer pass in this run."""
    now = {f"{e['op']}|{e['dtype']}": e for e in entries}
    out = []
    for key, status in sorted(baseline.items()):
        if status == "pass" and key in now and now[key]["status"] != "pass":
            e = now[key]
            out.append(f"{key}: was pass, now {e['status']} {e['detail']}".rstrip())
    return out


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


if __name__ == "__main__":
    sys.exit(main())
