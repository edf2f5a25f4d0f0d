"""PyTorch's ModuleInfo database (`module_db`) on CPU and on `neuron`: each module built once on
the CPU and copied to the device, its forward output, the gradients of its inputs and parameters,
and (for 4-D and 5-D inputs) its channels-last forward, values and output memory format, held
against the CPU's. Entries are keyed `module:<name>` (`module:nn.Conv2d`)."""

import copy
import itertools

from .reference import _leaves, _to_device, compare, max_abs_error

PREFIX = "module:"
MAX_INPUTS = 6  # module inputs per entry
# The modules `--ci` runs, in float32 (`make test`).
CI_MODULES = (
    "nn.Linear", "nn.Conv2d", "nn.ConvTranspose2d", "nn.BatchNorm2d", "nn.LayerNorm",
    "nn.GroupNorm", "nn.RMSNorm", "nn.Embedding", "nn.MultiheadAttention",
    "nn.TransformerEncoderLayer", "nn.LSTM", "nn.GRU", "nn.MaxPool2d", "nn.AvgPool2d",
    "nn.AdaptiveAvgPool2d", "nn.CrossEntropyLoss", "nn.GELU", "nn.ReflectionPad2d",
)
CI_DTYPE = "float32"
# Modules whose outputs are random whatever their inputs.
RANDOM_MODULES = {"nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d", "nn.RReLU"}
# Looser than the OpInfo tolerances: a module chains several ops (a convolution, then its
# gradients), each free to sum in another order; the model sweep uses the same 1e-4.
MODULE_TOLERANCES = {"float32": (1e-4, 1e-4), "float64": (1e-7, 1e-7),
                     "bfloat16": (1e-2, 1.6e-2), "float16": (1e-3, 1e-3),
                     "complex64": (1e-4, 1e-4)}


def module_infos():
    """Returns {entry key: ModuleInfo} for module_db."""
    from torch.testing._internal.common_modules import module_db
    return {PREFIX + m.name: m for m in module_db}


def module_tasks(names, dtypes):
    """(key, dtype) tasks: the named modules (all without names) in the dtypes each declares."""
    import torch
    infos = module_infos()
    keys = list(infos)
    if names:
        keys = [k for k in keys if k in names or k[len(PREFIX):] in names]
    return [(k, d) for k in keys for d in dtypes if getattr(torch, d) in infos[k].dtypes]


def _draws_random_numbers(module):
    """True if a module in training mode would drop out (Dropout with p > 0, attention dropout)."""
    import torch
    for m in module.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0:
            return True
        if isinstance(m, torch.nn.MultiheadAttention) and m.dropout > 0:
            return True
    return False


def _close(actual, expected, dtype, scale=1.0):
    """None or why `actual` (moved to the CPU) differs from `expected` at the module tolerance
    (its atol times `scale`)."""
    import torch
    atol, rtol = MODULE_TOLERANCES.get(dtype, (0.0, 0.0))
    atol *= scale
    try:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True,
                                   check_device=False, check_stride=False)
    except (AssertionError, TypeError, ValueError, RuntimeError) as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


def _cpu(tree):
    import torch
    from torch.utils._pytree import tree_map
    return tree_map(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, tree)


def _noncontiguous(t):
    """A copy of `t` with the same values in every other element of a wider buffer."""
    import torch
    if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.numel() == 0:
        return t
    nc = torch.empty(tuple(t.shape) + (2,), dtype=t.dtype, device=t.device).select(-1, 0)
    nc.copy_(t.detach())
    return nc.requires_grad_(t.requires_grad)


def _forward_backward(module, fwd, device, grad, noncontig=False):
    """Runs `module` on `device` copies of the forward input (non-contiguous ones with
    noncontig); returns (output, grads of the inputs and parameters that require them, for the
    sum of the floating outputs)."""
    import torch
    from torch.utils._pytree import tree_map
    args, kwargs = _to_device((fwd.args, fwd.kwargs), device, requires_grad=grad)
    if noncontig:
        args, kwargs = tree_map(_noncontiguous, (args, kwargs))
    out = module(*args, **kwargs)
    if not grad:
        return out, None
    leaves = [x for x in _leaves((args, kwargs)) if x.requires_grad]
    leaves += [p for p in module.parameters() if p.requires_grad]
    outs = [o for o in _leaves(out) if o.requires_grad and o.grad_fn is not None]
    if not leaves or not outs:
        return out, None
    loss = sum(o.float().sum() if not o.is_complex() else o.abs().float().sum() for o in outs)
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return out, [g if g is None else g.detach() for g in grads]


def _channels_last(module, fwd, dtype, place):
    """Runs copies of `module` (not yet run) on the CPU and on neuron with channels-last inputs
    when a forward input is 4-D or 5-D; returns (status, detail, err) comparing values and each
    output's memory format."""
    import torch
    tensors = [t for t in _leaves((fwd.args, fwd.kwargs)) if t.dim() in (4, 5)]
    if not tensors:
        return "skipped", "", None
    fmt = torch.channels_last if tensors[0].dim() == 4 else torch.channels_last_3d

    def convert(x):
        if isinstance(x, torch.Tensor) and x.dim() == tensors[0].dim():
            return x.detach().to(memory_format=fmt)
        return x
    from torch.utils._pytree import tree_map
    args, kwargs = tree_map(convert, (fwd.args, fwd.kwargs))
    try:
        cpu_mod = copy.deepcopy(module).to(memory_format=fmt)
        expected = cpu_mod(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001
        return "skipped", f"channels_last: CPU raised {type(exc).__name__}", None
    try:
        with place:
            dev_mod = copy.deepcopy(module).to("neuron").to(memory_format=fmt)
            dargs, dkwargs = _to_device((args, kwargs), "neuron")
            got = dev_mod(*dargs, **dkwargs)
            got_formats = [t.is_contiguous(memory_format=fmt) for t in _leaves(got)]
            got = _cpu(got)
    except Exception as exc:  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return "error", f"channels_last: {type(exc).__name__}: {first}", None
    why = _close(got, _cpu(expected), dtype)
    if why is not None:
        return "mismatch", "channels_last: " + why, max_abs_error(got, expected)
    want = [t.is_contiguous(memory_format=fmt) for t in _leaves(expected)]
    if got_formats != want:
        return "mismatch", (f"channels_last: output in {fmt} is {got_formats}, CPU's {want}"), None
    return "pass", "", None


def _run_input(info, mod_input, dtype_name, grad, place, training=True):
    """Compares one module input (the forward, the same with non-contiguous inputs, then
    channels-last); returns a list of (status, detail, err)."""
    import torch
    dtype = getattr(torch, dtype_name)
    ctor = mod_input.constructor_input
    torch.manual_seed(0)
    try:
        cpu_mod = info.module_cls(*ctor.args, **ctor.kwargs).to(dtype)
    except Exception as exc:  # noqa: BLE001
        return [("skipped", f"CPU constructor raised {type(exc).__name__}", None)]
    cpu_mod.train(training)
    if any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in cpu_mod.parameters()):
        with torch.no_grad():  # a lazy module: its first forward makes (and draws) its weights
            try:
                _forward_backward(cpu_mod, mod_input.forward_input, "cpu", False)
            except Exception as exc:  # noqa: BLE001
                return [("skipped", f"CPU reference raised {type(exc).__name__}", None)]
    if _draws_random_numbers(cpu_mod):
        cpu_mod.eval()  # training-mode dropout draws from generators that differ
    dev_mod = copy.deepcopy(cpu_mod)
    pristine = copy.deepcopy(cpu_mod)
    fwd = mod_input.forward_input
    try:
        exp_out, exp_grads = _forward_backward(cpu_mod, fwd, "cpu", grad)
    except Exception as exc:  # noqa: BLE001
        return [("skipped", f"CPU reference raised {type(exc).__name__}", None)]
    try:
        with place:
            dev_mod = dev_mod.to("neuron")
            out, grads = _forward_backward(dev_mod, fwd, "neuron", grad)
            out, grads = _cpu(out), _cpu(grads)
    except Exception as exc:  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return [("error", f"{type(exc).__name__}: {first}", None)]
    expected = (_cpu(exp_out), _cpu(exp_grads))
    results = [_judge(pristine, fwd, grad, dtype_name, (out, grads), expected)]
    # The same values in non-contiguous inputs (PyTorch's test_non_contiguous_tensors).
    try:
        with place:
            nc_mod = copy.deepcopy(pristine).to("neuron")
            got = _cpu(_forward_backward(nc_mod, fwd, "neuron", grad, noncontig=True))
    except Exception as exc:  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        results.append(("error", f"non-contiguous inputs: {type(exc).__name__}: {first}", None))
    else:
        status, detail, err = _judge(pristine, fwd, grad, dtype_name, got, expected)
        results.append((status, detail and "non-contiguous inputs: " + detail, err))
    results.append(_channels_last(pristine, fwd, dtype_name, place))
    return results


def _judge(module, fwd, grad, dtype_name, actual, expected):
    """(status, detail, err) of a device (output, grads) against CPU's."""
    why = _close(actual[0], expected[0], dtype_name)
    if why is None and expected[1] is not None:
        why = _close(actual[1], expected[1], dtype_name)
        why = None if why is None else "grad: " + why
    if why is not None and not _no_less_accurate(module, fwd, grad, dtype_name, actual, expected):
        return "mismatch", why, max_abs_error(actual, expected)
    return "pass", "", None


def _no_less_accurate(module, fwd, grad, dtype_name, actual, expected):
    """Whether the device's (output, grads) are at every element as close to the module's
    float64 run as CPU's, within the tolerance: a float16 module chains roundings that CPU and
    neuron place differently (LinearCrossEntropyLoss's gradients differ by one unit in the last
    place, each as far from float64 as the other)."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_map
    from .reference import _Float64Reference
    if dtype_name not in ("float16", "bfloat16", "float32"):
        return False
    wide = (lambda x: x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x)
    try:
        ref = _forward_backward(copy.deepcopy(module).double(), type(fwd)(
            *tree_map(wide, fwd.args), **tree_map(wide, fwd.kwargs)), "cpu", grad)
    except Exception:  # noqa: BLE001 - a module without float64 keeps the mismatch
        return False
    judge = _Float64Reference(None, None, grad, dtype_name)
    a, e, r = (tree_flatten(_cpu(x))[0] for x in (actual, expected, ref))
    return len(a) == len(e) == len(r) and all(
        x is y is z is None or judge._no_less_accurate(x, y, z) for x, y, z in zip(a, e, r))


def run_module_entry(info, key, dtype_name, place, merge, heartbeat, grad=True):
    """Runs a ModuleInfo's inputs (training mode; eval mode too where the two differ)."""
    import torch
    dtype = getattr(torch, dtype_name)
    if key[len(PREFIX):] in RANDOM_MODULES:
        merge("skipped", "random module (values not comparable)", None)
        return 0
    modes = [True] + ([False] if info.train_and_eval_differ else [])
    compared = 0
    for training in modes:
        torch.manual_seed(0)
        try:
            inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=grad,
                                             training=training)
        except Exception as exc:  # noqa: BLE001
            merge("skipped", f"module input generation raised {type(exc).__name__}", None)
            continue
        for mod_input in itertools.islice(inputs, MAX_INPUTS):
            if mod_input.forward_input is None:
                continue
            heartbeat()
            for status, detail, err in _run_input(info, mod_input, dtype_name, grad, place, training):
                compared += status != "skipped"
                merge(status, detail if training else f"eval: {detail}" if detail else "", err)
    return compared
