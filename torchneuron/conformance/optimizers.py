"""PyTorch's OptimizerInfo database (`optim_db`) on CPU and on `neuron`: each optimizer's inputs
(its configurations), in each implementation it offers (for-loop, foreach, fused where CPU has
it), take a few steps on the same parameters with the same loss on both devices; the parameters
after every step and the final optimizer state must agree. Entries are keyed `optim:<name>`."""

import itertools

from .modules import MODULE_TOLERANCES, _close
from .reference import _leaves, max_abs_error

PREFIX = "optim:"
MAX_INPUTS = 8  # optimizer configurations per entry
STEPS = 3
# The optimizers `--ci` runs, in float32 (`make test`).
CI_OPTIMIZERS = ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS")
DTYPES = ("float32", "float64", "complex64")


def optim_infos():
    """Returns {entry key: OptimizerInfo} for optim_db."""
    from torch.testing._internal.common_optimizers import optim_db
    return {PREFIX + o.name: o for o in optim_db}


def optim_tasks(names, dtypes):
    """(key, dtype) tasks: the named optimizers (all without names) in the requested dtypes
    among float32, float64 and (where the optimizer takes it) complex64."""
    infos = optim_infos()
    keys = list(infos)
    if names:
        keys = [k for k in keys if k in names or k[len(PREFIX):] in names]
    return [(k, d) for k in keys for d in dtypes
            if d in DTYPES and (d != "complex64" or infos[k].supports_complex)]


def _impls(info):
    """The implementation flags to run: for-loop, foreach, and fused where CPU has it."""
    impls = [{"foreach": False}, {"foreach": True}] if "foreach" in info.supported_impls else [{}]
    if "fused" in info.supported_impls and "cpu" in getattr(info, "supports_fused_on", ()):
        impls.append({"fused": True})
    return impls


# The parameters' shapes; the second set for optimizers of matrices only (Muon).
SHAPES = (((5, 4), (5,), ()), ((5, 4),))


def _problem(dtype, shapes):
    """The starting parameters and the fixed loss terms (scale, target), made on the CPU."""
    import torch
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(s, generator=g, dtype=dtype) for s in shapes]
    real = torch.empty((), dtype=dtype).real.dtype
    scales = [torch.rand(s, generator=g).to(real) + 0.5 for s in shapes]  # a real loss
    targets = [torch.randn(s, generator=g, dtype=dtype) for s in shapes]
    return params, scales, targets


def _steps(info, kwargs, dtype, device, shapes=SHAPES[0]):
    """Runs STEPS optimizer steps on `device`; returns ([params after each step], final state)."""
    params, scales, targets = _problem(dtype, shapes)
    params = [p.to(device).requires_grad_() for p in params]
    scales, targets = [s.to(device) for s in scales], [t.to(device) for t in targets]
    opt = info.optim_cls(params, **kwargs)

    def closure():
        """The loss sum(scale * |p - target|^2), its gradients set (elementwise, exact)."""
        opt.zero_grad()
        loss = sum((s * (p - t).abs() ** 2).sum() for p, s, t in zip(params, scales, targets))
        loss.backward()
        return loss
    history = []
    for _ in range(STEPS):
        if info.step_requires_closure:
            opt.step(closure)
        else:
            closure()
            opt.step()
        history.append([p.detach().cpu().clone() for p in params])
    state = [t.detach().cpu() for t in _leaves(list(opt.state_dict()["state"].values()))]
    return history, state


def _run_config(info, kwargs, dtype_name, place):
    """Compares one configuration; returns (status, detail, err)."""
    import torch
    dtype = getattr(torch, dtype_name)
    expected = None
    for shapes in SHAPES:
        try:
            expected = _steps(info, kwargs, dtype, "cpu", shapes)
            break
        except Exception as exc:  # noqa: BLE001
            refused = exc
    if expected is None:
        return "skipped", f"CPU reference raised {type(refused).__name__}", None
    try:
        with place:
            got = _steps(info, kwargs, dtype, "neuron", shapes)
    except Exception as exc:  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return "error", f"{type(exc).__name__}: {first}", None
    for step, (g, e) in enumerate(zip(got[0], expected[0]), 1):
        why = _close(g, e, dtype_name)
        if why is not None:
            return "mismatch", f"{kwargs}: params after step {step}: {why}", max_abs_error(g, e)
    if len(got[1]) != len(expected[1]):
        return "mismatch", f"{kwargs}: {len(got[1])} state tensors, CPU {len(expected[1])}", None
    # State is held to the tolerance relative to its largest value: LBFGS keeps the differences
    # of converged iterates (1e-9 against 200), rounding noise of the dot products it sums.
    scale = max([1.0] + [e.abs().max().item() for e in expected[1] if e.numel() and
                         (e.is_floating_point() or e.is_complex())])
    why = _close(got[1], expected[1], dtype_name, scale)
    if why is not None:
        return "mismatch", f"{kwargs}: state: {why}", max_abs_error(got[1], expected[1])
    return "pass", "", None


def run_optim_entry(info, dtype_name, place, merge, heartbeat):
    """Runs an OptimizerInfo's configurations in each implementation; returns how many compared."""
    import torch
    if info.only_supports_sparse_grads:
        merge("skipped", "takes sparse gradients only (no sparse neuron tensors)", None)
        return 0
    assert dtype_name in MODULE_TOLERANCES
    try:
        inputs = info.optim_inputs_func(device="cpu", dtype=getattr(torch, dtype_name))
    except TypeError:
        inputs = info.optim_inputs_func(device="cpu")
    compared = 0
    for opt_input in itertools.islice(inputs, MAX_INPUTS):
        if opt_input.params is not None:
            continue  # a configuration with its own parameter groups
        for impl in _impls(info):
            heartbeat()
            status, detail, err = _run_config(info, {**opt_input.kwargs, **impl}, dtype_name, place)
            compared += status != "skipped"
            merge(status, detail, err)
    return compared
