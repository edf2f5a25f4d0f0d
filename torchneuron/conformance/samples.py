"""Running one (OpInfo, dtype) entry: each of its samples on the CPU and on `neuron` (eagerly or
through torch.compile), compared, with the ATen ops the neuron run ran natively or sent to the
CPU fallback; OpInfoRunner runs entries in the workers of workers.py."""

import contextlib
import itertools

from .out_arg import out_phase
from .opinfo import MAX_SAMPLES, NONDETERMINISTIC, UNDECLARED_PROBED, all_ops, op_key
from .reference import (FLOAT64_ARBITRATED, GAUGE_FREE_OPS, GAUGE_MATCHED, _Float64Reference, _grads, _to_device,
                        compare, max_abs_error)
from .workers import heartbeat


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

    @contextlib.contextmanager
    def fallbacks_only(self):
        """Counts fallbacks without the dispatch mode: under any Python mode a composite's out=
        (linalg.matrix_rank) runs functionally and never writes out=, on CPU as on neuron."""
        mode, self.mode = self.mode, None
        try:
            with self:
                yield self
        finally:
            self.mode = mode

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
    expected = (tree_map(to_cpu, exp_out), exp_grads)
    result = _device_run(op, sample, dtype, grad, place, compile_mode, host_leaves, expected)
    if result[0] in ("mismatch", "error") and place.mode is not None:
        # Under any Python dispatch mode some composites run another way, on CPU as on neuron
        # (complex linalg.pinv, 1.6 off): the verdict is the plain run's, as users run it.
        result = _device_run(op, sample, dtype, grad, place.fallbacks_only(), compile_mode,
                             host_leaves, expected)
    return result


def _device_run(op, sample, dtype, grad, ctx, compile_mode, host_leaves, expected):
    """Runs the sample on neuron inside `ctx` and holds it against expected = (out, grads)."""
    import torch
    from torch.utils._pytree import tree_map
    to_cpu = (lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x)
    exp_out, exp_grads = expected
    try:
        with ctx:
            call = _compiled(op) if compile_mode else op
            if grad:
                out, grads = _grads(op, sample, "neuron", call, host_leaves)
            else:
                inp, args, kwargs = _to_device((sample.input, sample.args, sample.kwargs), "neuron",
                                               host_leaves=host_leaves)
                out, grads = call(inp, *args, **kwargs), None
            out, grads = tree_map(to_cpu, out), tree_map(to_cpu, grads)
            # An op's own CPU result may still be arriving: `to("cpu", non_blocking=True)` copies
            # into pinned memory asynchronously, as on CUDA, and is read only after a synchronize.
            torch.neuron.synchronize()
    except Exception as exc:  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return "error", f"{type(exc).__name__}: {first}", None
    reference = _Float64Reference(op, sample, grad, dtype)
    arbitrated = False
    why = compare(out, exp_out, dtype)
    gauge = why is not None and op.name in GAUGE_FREE_OPS and _gauge_match(sample, out, exp_out, dtype)
    if gauge:
        why = None
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
    return "pass", FLOAT64_ARBITRATED if arbitrated else GAUGE_MATCHED if gauge else "", None


def _gauge_match(sample, out, exp_out, dtype):
    """Whether the two outputs agree through the sample's output_process_fn_grad (the
    gauge-invariant parts of a decomposition: |U|, S, U @ Vh)."""
    processed = getattr(sample, "output_process_fn_grad", None)
    if processed is None:
        return False
    try:
        return compare(processed(out), processed(exp_out), dtype) is None
    except (RuntimeError, TypeError, IndexError):
        return False


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


def run_entry(op, dtype_name, grad=True, max_samples=MAX_SAMPLES, compile_mode=False, out_check=True):
    """Runs one (OpInfo, dtype) entry in this process and returns its record; with out_check
    (eager only) an op that takes out= also writes into a non-contiguous one (out_arg.py)."""
    import torch
    dtype = getattr(torch, dtype_name)
    entry = {"op": op_key(op), "dtype": dtype_name, "status": "skipped", "detail": "",
             "max_abs_err": None, "samples": 0, "float64_arbitrated": 0, "fallback": {},
             "native": []}
    if op.name in NONDETERMINISTIC:
        entry["detail"] = "random op (values not comparable)"
        return entry
    if dtype not in op.supported_dtypes("cpu"):
        if dtype_name not in UNDECLARED_PROBED:
            entry["detail"] = "dtype not supported on CPU"
            return entry
        # OpInfos rarely list the unsigned types that PyTorch gives the basic ops: run the
        # samples anyway and compare those that CPU itself runs.
        entry["undeclared"] = True
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
            entry["gauge_matched"] = entry.get("gauge_matched", 0) + (detail == GAUGE_MATCHED)
            _merge(entry, status, detail, err)
        if out_check and not with_grad and not compile_mode:
            entry["out_samples"] = out_phase(
                op, samples, probes, dtype_name, _host_leaves,
                lambda st, de, er: _merge(entry, st, de, er), heartbeat, place)
            entry["samples"] += entry["out_samples"]
    if entry["status"] == "skipped" and not entry["detail"]:
        entry["detail"] = "no samples"
    if entry["status"] in ("pass", "mismatch", "error"):
        entry["detail"] = entry["detail"] if entry["status"] != "pass" else ""
    entry["fallback"], entry["native"] = dict(sorted(place.fallback.items())), place.native()
    return entry


class OpInfoRunner:
    """Runs (op key, dtype) tasks in a worker: the conformance tool's task runner for run_tasks."""

    def __init__(self, extra=None, grad=True, compile_mode=False, out_check=True):
        self.extra, self.grad, self.compile_mode, self.ops = extra, grad, compile_mode, None
        self.out_check = out_check

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
        if key.startswith(("module:", "optim:")):
            from .suites import run_suite_entry
            return run_suite_entry(key, dtype, self.grad)
        return run_entry(self.ops[key], dtype, self.grad, compile_mode=self.compile_mode,
                         out_check=self.out_check)

    def failed(self, task, detail, trace=None):
        """Returns the error record of a task that raised, timed out or killed its worker."""
        record = {"op": task[0], "dtype": task[1], "status": "error", "detail": detail,
                  "max_abs_err": None, "samples": 0, "float64_arbitrated": 0, "fallback": {},
                  "native": []}
        if trace:
            record["trace"] = trace
        return record
