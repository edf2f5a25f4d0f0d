"""Running one model type (a row of the sweep): load, the CPU reference, neuron's forward and
backward, torch.compile(backend="neuron") forward and backward, and the bfloat16
from_pretrained(device_map="neuron") load (pretrained.py), each column compared with the CPU; a
mismatch or error is weighed against a float64 run and Dynamo's own eager backend, so that its
reason says whose it is. SweepRunner runs model types in conformance's workers."""

import contextlib
import copy
import time

from . import reference
from .pretrained import run_pretrained
from .inputs import moved, widened
from .models import _seed, _set_offline, architectures


ATOL = RTOL = 1e-4
COLUMNS = ("load", "forward", "backward", "compile", "compile_backward", "pretrained")
RANK = {"n/a": 0, "skipped": 0, "pass": 1, "mismatch": 2, "error": 3}
# The CPU reference (the tiny model built and run on the CPU): pass | error (the harness could
# not build or run it: a harness bug) | unavailable (it needs a package this environment lacks)
# | skipped (an unknown model type). Never mixed with the device columns above.
REFERENCE_STATUSES = ("pass", "error", "unavailable", "skipped")


def float_outputs(out, prefix="out"):
    """Flattens a ModelOutput / tuple / dict into {path: floating tensor}."""
    import torch
    if isinstance(out, torch.Tensor):
        return {prefix: out} if out.is_floating_point() else {}
    if hasattr(out, "items"):
        items = out.items()
    elif isinstance(out, (list, tuple)):
        items = enumerate(out)
    else:
        return {}
    flat = {}
    for key, value in items:
        flat.update(float_outputs(value, f"{prefix}.{key}"))
    return flat


def compare_tensors(actual, expected, atol=None, rtol=None, accept=None, label=""):
    """Compares {name: tensor} dicts; returns (None or reason, max abs error). accept(name, act,
    exp, bad), when given, returns the mask of out-of-tolerance elements that still fail."""
    import torch
    atol, rtol = ATOL if atol is None else atol, RTOL if rtol is None else rtol
    worst, why = 0.0, None
    for name, exp in expected.items():
        act = actual.get(name)
        if act is None or act.shape != exp.shape:
            why = why or (f"{name}: missing on neuron" if act is None else
                          f"{name}: shape {tuple(act.shape)} != {tuple(exp.shape)}")
            continue
        act, exp = act.detach().cpu().double(), exp.detach().double()
        diff = (act - exp).abs()
        both_nan = torch.isnan(act) & torch.isnan(exp)
        finite = diff[torch.isfinite(diff)]
        if finite.numel():
            worst = max(worst, finite.max().item())
        bad = ~((diff <= atol + rtol * exp.abs()) | both_nan)
        if bad.any() and accept is not None:
            bad = accept(name, act, exp, bad)
        if bad.any() and why is None:
            why = f"{name}: {int(bad.sum())}/{bad.numel()} elements differ{label}"
    return why, worst


def _record(model_type, class_name):
    """Returns an empty sweep row."""
    return {"model": model_type, "class": class_name, "status": "skipped", "reference": "skipped",
            "built": False, "strategy": None, "shrink_attempts": [], "load": "skipped", "forward": "skipped", "backward": "skipped", "compile": "skipped",
            "compile_backward": "skipped", "pretrained": "skipped", "reasons": {}, "fallback": {},
            "forward_max_err": None,
            "backward_max_err": None, "compile_max_err": None, "compile_backward_max_err": None,
            "pretrained_max_err": None, "graphs_compiled": 0, "graphs_eager": 0, "time_s": None}


_first_line = reference.first_line


def _set(row, column, status, reason=""):
    """Sets a column's status and (for anything but pass) its reason."""
    row[column] = status
    if reason:
        row["reasons"][column] = reason


def _loss(outputs):
    """Returns the sum of the floating outputs that require grad, or None."""
    parts = [t.float().sum() for t in outputs.values() if t.requires_grad]
    return sum(parts) if parts else None


def _backward(model, outputs):
    """Runs backward from the output sum; returns {parameter name: grad} or None without a graph."""
    loss = _loss(outputs)
    if loss is None:
        return None
    loss.backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def _neuron_run(model, inputs, expected, expected_grads, row):
    """Runs the neuron model forward and backward; fills the row's columns and returns the
    outputs and the parameter gradients (on CPU), each None when not computed."""
    import torch
    dev = moved(inputs, "neuron")
    _seed()
    try:
        out = float_outputs(model(**dev))
    except Exception as exc:  # noqa: BLE001
        _set(row, "forward", "error", _first_line(exc))
        _set(row, "backward", "skipped", "forward failed on neuron")
        return None, None
    why, row["forward_max_err"] = compare_tensors(out, expected)
    _set(row, "forward", "mismatch" if why else "pass", why or "")
    if expected_grads is None:
        _set(row, "backward", "skipped", "no floating output requires grad")
        return out, None
    try:
        grads = _backward(model, out)
        grads = {n: g.cpu() for n, g in (grads or {}).items()}
        torch.neuron.synchronize()
    except Exception as exc:  # noqa: BLE001
        _set(row, "backward", "error", _first_line(exc))
        return out, None
    why, row["backward_max_err"] = compare_tensors(grads, expected_grads)
    _set(row, "backward", "mismatch" if why else "pass", why or "")
    return out, grads


def _compile_run(model, cpu_model, inputs, expected, row):
    """Runs torch.compile(backend='neuron') forward when that backend exists and returns its
    outputs (None if it did not run). A mismatch is checked against Dynamo's own `eager` backend
    on the CPU model: when that gives the same output, the reason says the difference comes from
    tracing, not from neuron."""
    import torch
    if "neuron" not in torch._dynamo.list_backends():
        _set(row, "compile", "n/a", "backend not built yet")
        return
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="neuron")
        _seed()
        with torch.no_grad(), _counting_graphs(row):
            out = float_outputs(compiled(**moved(inputs, "neuron")))
    except Exception as exc:  # noqa: BLE001
        _set(row, "compile", "error", _first_line(exc) + _if_dynamo_cpu_raises(cpu_model, inputs))
        return
    why, row["compile_max_err"] = compare_tensors(out, expected)
    if why and _dynamo_cpu_agrees(cpu_model, inputs, out):
        why += " (Dynamo's eager backend on CPU gives the same output: a tracing difference, not neuron's)"
    _set(row, "compile", "mismatch" if why else "pass", why or "")
    return out


def _compile_backward_run(model, cpu_model, inputs, expected_grads, eager_grads, row):
    """Runs a compiled training step's gradients: torch.compile(backend='neuron') forward with
    autograd, then backward from the same loss; compares the parameter gradients with the CPU
    and returns them (None if they were not computed).
    A mismatch that eager neuron's backward, or Dynamo's eager backend on the CPU model, shares
    (within tolerance) says so."""
    import torch
    if row["compile"] == "n/a":
        _set(row, "compile_backward", "n/a", row["reasons"].get("compile", ""))
        return
    if expected_grads is None:
        _set(row, "compile_backward", "skipped", "no floating output requires grad")
        return
    try:
        model.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="neuron")
        _seed()
        with _counting_graphs(row):
            out = float_outputs(compiled(**moved(inputs, "neuron")))
            grads = {n: g.cpu() for n, g in (_backward(model, out) or {}).items()}
    except Exception as exc:  # noqa: BLE001
        _set(row, "compile_backward", "error", _first_line(exc) + _if_dynamo_cpu_raises(cpu_model, inputs))
        return
    why, row["compile_backward_max_err"] = compare_tensors(grads, expected_grads)
    if why and eager_grads is not None and compare_tensors(grads, eager_grads)[0] is None:
        why += " (as in eager neuron's backward)"
    elif why and _dynamo_cpu_grads_agree(cpu_model, inputs, grads):
        why += " (Dynamo's eager backend on CPU gives the same gradients: a tracing difference, not neuron's)"
    _set(row, "compile_backward", "mismatch" if why else "pass", why or "")
    return grads


@contextlib.contextmanager
def _counting_graphs(row):
    """Adds to the row the graphs the neuron compiler compiled and those it gave back to run
    eagerly (a rejected graph or a compiler failure), with the first such warning as the reason:
    a compiled column can pass on graphs that never ran compiled."""
    import warnings
    import torchneuron
    torchneuron.reset_compile_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            stats = torchneuron.compile_stats()
            row["graphs_compiled"] += stats["graphs_compiled"]
            row["graphs_eager"] += stats["graphs_eager"]
            given_back = [str(w.message) for w in caught if str(w.message).startswith("torchneuron.compile:")]
            if given_back and "graphs_eager" not in row["reasons"]:
                row["reasons"]["graphs_eager"] = given_back[0][:300]


def _dynamo_cpu_grads_agree(cpu_model, inputs, grads):
    """True if the CPU model's gradients through torch.compile(backend='eager') match `grads`.
    The CPU model's own gradients are set aside and put back."""
    import torch
    saved = {n: p.grad for n, p in cpu_model.named_parameters()}
    try:
        cpu_model.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        _seed()
        traced = _backward(cpu_model, float_outputs(torch.compile(cpu_model, backend="eager")(**inputs)))
        return traced is not None and compare_tensors(grads, traced)[0] is None
    except Exception:  # noqa: BLE001 - no verdict: the mismatch stands as it is
        return False
    finally:
        for n, p in cpu_model.named_parameters():
            p.grad = saved[n]


def _dynamo_cpu_forward(cpu_model, inputs):
    """The CPU model's float outputs through torch.compile(backend='eager'), under no_grad: what
    Dynamo's tracing alone gives, with no neuron code involved. Raises what that raises."""
    import torch
    torch._dynamo.reset()
    _seed()
    with torch.no_grad():
        return float_outputs(torch.compile(cpu_model, backend="eager")(**inputs))


def _if_dynamo_cpu_raises(cpu_model, inputs):
    """A note for a compile error: whether Dynamo's eager backend on the CPU model raises too,
    which makes the error Dynamo's tracing of the model, not neuron's."""
    try:
        _dynamo_cpu_forward(cpu_model, inputs)
    except Exception:  # noqa: BLE001 - any error there is the model's under Dynamo
        return " (Dynamo's eager backend on CPU raises too: a tracing problem, not neuron's)"
    return ""


def _dynamo_cpu_agrees(cpu_model, inputs, out):
    """True if torch.compile(backend='eager') of the CPU model matches `out` (CPU tensors)."""
    try:
        traced = _dynamo_cpu_forward(cpu_model, inputs)
    except Exception:  # noqa: BLE001 - no verdict: the mismatch stands as it is
        return False
    return compare_tensors(out, traced)[0] is None


def _cpu_reference(model_type, class_name, row, names=None):
    """Builds the model and runs it on the CPU (reference.prepare: the shrink ladder, inputs
    from what the model declares, a sub-model's inputs from its parent); fills the row's
    reference column and returns the Prepared (None for an unknown model type)."""
    try:
        prep = reference.prepare(model_type, class_name, names)
    except LookupError as exc:
        _set(row, "reference", "skipped", str(exc).strip("'\""))
        _set(row, "load", "skipped", str(exc).strip("'\""))
        return None
    row["strategy"] = prep.strategy or prep.built_strategy
    row["built"] = prep.built_strategy is not None
    row["shrink_attempts"] = [f"{s} ({stage}): {why[:200]}" for s, stage, why in prep.attempts]
    if prep.inputs is not None:
        _set(row, "reference", "pass")
    elif prep.unavailable:
        _set(row, "reference", "unavailable", f"needs {prep.unavailable}: {prep.reason}")
    elif not row["built"]:
        _set(row, "reference", "error", "tiny model could not be built on CPU: " + prep.reason)
    else:
        _set(row, "reference", "error", prep.reason)
    return prep


def run_model(model_type, class_name=None, names=None):
    """Runs one model type: the CPU reference, then load / forward / backward / compile /
    pretrained on neuron; returns its row."""
    start = time.monotonic()
    names = names or architectures()
    class_name = class_name or names.get(model_type)
    row = _record(model_type, class_name)
    prep = _cpu_reference(model_type, class_name, row, names)
    if prep is None or prep.inputs is None:
        for column in COLUMNS:
            if column not in row["reasons"]:
                _set(row, column, "skipped", "no CPU reference: " + row["reasons"]["reference"][:200])
        return _finish(row, start)
    return run_device_columns(row, prep.model, prep.inputs, prep.outputs, start)


def run_device_columns(row, model, inputs, outputs, start, pretrained=run_pretrained, skip=(),
                       accept_rounding=False):
    """The device columns of a row whose CPU reference ran: `model` on the CPU gave `outputs` on
    `inputs`; load / forward / backward / compile / compile backward on neuron, then
    pretrained(model, inputs, expected, row) (the diffusers sweep passes its own); the columns
    in `skip` are recorded as skipped, not run; accept_rounding: see
    _weigh_mismatches_against_float64. Returns the row."""
    import torchneuron
    lap = _stopwatch(row, start)
    lap("reference")
    expected = float_outputs(outputs)
    expected_grads = _backward(model, expected)
    torchneuron.reset_fallback_report()
    try:
        neuron_model = _copy_to_neuron(model, inputs)
        neuron_model.zero_grad(set_to_none=True)
        _set(row, "load", "pass")
    except Exception as exc:  # noqa: BLE001
        _set(row, "load", "error", "copy to neuron raised " + _first_line(exc))
        return _finish(row, start, torchneuron)
    eager_out, eager_grads = _neuron_run(neuron_model, inputs, expected, expected_grads, row)
    lap("eager")
    compiled_out = compiled_grads = None
    if "compile" in skip:
        _set(row, "compile", "skipped", "not run (--skip)")
    else:
        compiled_out = _compile_run(neuron_model, model, inputs, expected, row)
    lap("compile")
    if "compile_backward" in skip:
        _set(row, "compile_backward", "skipped", "not run (--skip)")
    else:
        compiled_grads = _compile_backward_run(neuron_model, model, inputs, expected_grads, eager_grads, row)
    lap("compile_backward")
    results = {"forward": (eager_out, expected), "backward": (eager_grads, expected_grads),
               "compile": (compiled_out, expected), "compile_backward": (compiled_grads, expected_grads)}
    _weigh_mismatches_against_float64(row, model, inputs, results, accept_rounding)
    lap("float64")
    if "pretrained" in skip:
        _set(row, "pretrained", "skipped", "not run (--skip)")
    else:
        pretrained(model, inputs, expected, row)
    lap("pretrained")
    return _finish(row, start, torchneuron)


def _copy_to_neuron(model, inputs):
    """A deep copy of the CPU model on neuron. A module that keeps a tensor computed in forward
    (old-style weight_norm's `weight`) holds a non-leaf after the reference's autograd run, which
    deepcopy refuses: one forward under no_grad recomputes it without a graph, then it copies."""
    import torch
    try:
        return copy.deepcopy(model).to("neuron")
    except RuntimeError as exc:
        if "graph leaves" not in str(exc):
            raise
    with torch.no_grad():
        model(**inputs)
    return copy.deepcopy(model).to("neuron")


def _stopwatch(row, start):
    """Returns lap(stage), which records in row["stage_s"] the seconds since the last lap: where a
    model's time goes (to pick fast CI models, to find slow columns)."""
    last = [start]

    def lap(stage):
        """Records one stage's seconds."""
        now = time.monotonic()
        row.setdefault("stage_s", {})[stage] = round(now - last[0], 2)
        last[0] = now
    return lap


def _float64_reference(cpu_model, inputs):
    """Outputs and parameter gradients of a float64 copy of the CPU model on the same inputs, or
    None when the model does not run in float64."""
    try:
        model = copy.deepcopy(cpu_model).double()
        model.zero_grad(set_to_none=True)
        wide = widened(inputs)
        _seed()
        out = float_outputs(model(**wide))
        detached = {k: v.detach().clone() for k, v in out.items()}
        return detached, _backward(model, out)
    except Exception:  # noqa: BLE001 - no verdict: the mismatch stands as it is
        return None


def within_cpu_rounding(float64):
    """compare_tensors' accept hook: an element outside tolerance still passes where neuron's
    distance from the wider run (`float64`: {name: tensor}) is at most twice the CPU result's
    largest on that tensor (the float32 rounding of a deep sum; pretrained.compare_bf16 passes
    the float32 run against bfloat16 results)."""
    def accept(name, act, exp, bad):
        wide = float64.get(name)
        if wide is None or wide.shape != exp.shape:
            return bad
        wide = wide.detach().double()
        cpu_error = (exp - wide).abs().nan_to_num(0.0).max()
        return bad & ~((act - wide).abs() <= 2 * cpu_error)
    return accept


def _weigh_mismatches_against_float64(row, cpu_model, inputs, results, accept_rounding=False):
    """Adds to each mismatch's reason the largest errors of neuron and of CPU float32 against a
    float64 run of the CPU model: a tolerance miss where neuron is the closer of the two is CPU
    rounding, not a neuron bug. The status stays a mismatch, unless accept_rounding (the
    diffusers corpus) and within_cpu_rounding passes every element: then the column passes and
    row["float64_accepted"] names it."""
    columns = [c for c, (actual, expected) in results.items()
               if row[c] == "mismatch" and actual is not None and expected is not None]
    if not columns:
        return
    reference = _float64_reference(cpu_model, inputs)
    if reference is None:
        return
    outputs, grads = reference
    for column in columns:
        actual, expected = results[column]
        wide = outputs if column in ("forward", "compile") else grads
        if wide is None:
            continue
        _, neuron_error = compare_tensors(actual, wide)
        _, cpu_error = compare_tensors(expected, wide)
        row["reasons"][column] += (f"; against float64: neuron's largest error {neuron_error:.2g},"
                                   f" CPU float32's {cpu_error:.2g}")
        if accept_rounding and compare_tensors(actual, expected, accept=within_cpu_rounding(wide))[0] is None:
            row[column] = "pass"
            row.setdefault("float64_accepted", []).append(column)
            row["reasons"][column + "_float64"] = row["reasons"].pop(column)


def _finish(row, start, torchneuron=None):
    """Fills the fallback list, overall status and time of a row."""
    if torchneuron is not None:
        report = torchneuron.fallback_report()
        row["fallback"] = dict(sorted(report.items(), key=lambda kv: (-kv[1], kv[0])))
    worst = max(RANK[row[c]] for c in COLUMNS)
    if row["reference"] != "pass":  # a harness failure or a missing package, not the device's
        row["status"] = {"error": "reference_error", "unavailable": "unavailable"}.get(
            row["reference"], "skipped")
        row["time_s"] = round(time.monotonic() - start, 2)
        return row
    row["status"] = ("skipped" if row["load"] == "skipped" or worst == 0 else
                     {1: "pass", 2: "mismatch", 3: "error"}[worst])
    if row["status"] == "pass" and row["forward"] == "skipped":
        row["status"] = "skipped"
    row["time_s"] = round(time.monotonic() - start, 2)
    return row


class SweepRunner:
    """The sweep's task runner for conformance.run_tasks: one task is one model type."""

    def setup(self):
        """Prepares a fresh worker: offline, quiet, one compute thread, silent fallbacks."""
        import warnings
        _set_offline()
        warnings.simplefilter("ignore")
        import torch
        import torchneuron
        torch.set_num_threads(1)
        torchneuron.set_fallback_mode("silent")
        import transformers
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()  # save / load bars of the pretrained column
        self.names = architectures()

    def run(self, task):
        """Runs one model type and returns its row."""
        return run_model(task, self.names.get(task), self.names)

    def failed(self, task, detail, trace=None):
        """Returns the error row of a model whose run raised, timed out or killed its worker."""
        row = _record(task, None)
        for column in COLUMNS:
            _set(row, column, "error", detail)
        row["status"] = "error"
        if trace:
            row["trace"] = trace
        return row
