"""The CPU reference and how a device result is held against it: a sample copied to a device and
run (with the gradients of its floating outputs), tolerances per dtype, and the float64 run of
the op (SciPy's for float64 special functions) that arbitrates when the device and the CPU disagree."""

from .opinfo import INTEGRAL_DTYPES

TOLERANCES = {"float32": (1e-5, 1.3e-6), "bfloat16": (1e-2, 1.6e-2), "int64": (0.0, 0.0),
              "float64": (1e-7, 1e-7), "float16": (1e-3, 1e-3), "complex64": (1e-5, 1.3e-6),
              "uint16": (0.0, 0.0), "uint32": (0.0, 0.0), "uint64": (0.0, 0.0), "bool": (0.0, 0.0),
              # float8 results compare bitwise (torch.testing allows nothing else)
              "float8_e4m3fn": (0.0, 0.0), "float8_e5m2": (0.0, 0.0)}


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
    moved = tree_unflatten([move(i, x) for i, x in enumerate(leaves)], spec)
    # A factory op's sample names the device it was made for (arange(..., device="cpu")): the
    # device run must make its result on `device`, not on the CPU.
    if isinstance(moved, tuple) and len(moved) == 3 and isinstance(moved[2], dict) \
            and moved[2].get("device") is not None:
        moved = (moved[0], moved[1], {**moved[2], "device": device})
    return moved


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
    (output, grads of the sum of the float outputs output_process_fn_grad keeps)."""
    import torch
    inp, args, kwargs = _to_device((sample.input, sample.args, sample.kwargs), device, True, host_leaves)
    out = (call or op)(inp, *args, **kwargs)
    leaves = [x for x in _leaves((inp, args, kwargs)) if x.requires_grad]
    # The part of the output the OpInfo declares well defined for gradients, as PyTorch's own
    # gradient tests take it (a singular vector's sign is not: U.abs() is).
    processed = getattr(sample, "output_process_fn_grad", None)
    outs = [o for o in _leaves(processed(out) if processed else out) if o.requires_grad and o.grad_fn is not None]
    if not leaves or not outs:
        return out, None
    loss = sum(o.float().sum() for o in outs)
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return out, [g if g is None else g.detach() for g in grads]


FLOAT64_ARBITRATED = "differs from CPU, matches the float64 reference"
GAUGE_MATCHED = "differs from CPU only in the vectors' signs (phases), which the op leaves free"
# Decompositions whose singular vectors / eigenvectors are unique only up to sign (phase, for
# complex): LAPACK implementations choose differently (MKL's and OpenBLAS's gesdd do), so their
# outputs are compared through the OpInfo's output_process_fn_grad (|U|, S, |Vh|, U @ Vh, ...).
GAUGE_FREE_OPS = frozenset({"svd", "linalg.svd", "linalg.eigh"})
# The sample dtypes a float64 run can arbitrate (float64 itself has nothing wider to ask, except
# SciPy for the special functions below).
ARBITRATED_DTYPES = ("float32", "bfloat16", "float16", "complex64") + INTEGRAL_DTYPES

# torch.special functions and their SciPy twins: an implementation independent of CPU PyTorch's,
# to arbitrate float64 samples (CPU's float64 Bessel functions are off by up to 3e-7 in places).
_SCIPY = {"special.bessel_j0": "j0", "special.bessel_j1": "j1", "special.bessel_y0": "y0",
          "special.bessel_y1": "y1", "special.modified_bessel_i0": "i0", "special.modified_bessel_i1": "i1",
          "special.modified_bessel_k0": "k0", "special.modified_bessel_k1": "k1",
          "special.scaled_modified_bessel_k0": "k0e", "special.scaled_modified_bessel_k1": "k1e",
          "special.erfcx": "erfcx", "special.ndtri": "ndtri", "special.log_ndtr": "log_ndtr",
          "special.airy_ai": lambda sp, x: sp.airy(x)[0],
          "special.spherical_bessel_j0": lambda sp, x: sp.spherical_jn(0, x),
          "special.zeta": "zeta"}


def _scipy_result(op, sample):
    """The float64 sample's result by SciPy, or None (no twin, no SciPy, other arguments)."""
    import torch
    function = _SCIPY.get(getattr(op, "name", None))
    if function is None or sample.kwargs:
        return None
    try:
        import numpy as np
        import scipy.special as sp
    except ImportError:
        return None
    arguments = [a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a
                 for a in (sample.input, *sample.args)]
    with np.errstate(all="ignore"):
        value = getattr(sp, function)(*arguments) if isinstance(function, str) else function(sp, *arguments)
    return torch.as_tensor(np.asarray(value, dtype=np.float64))


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
        # An integer sample is widened too: it only comes here for floating outputs, which its
        # ops compute by promoting the integers (hfft2 of integers).
        widen_ints = self.dtype in INTEGRAL_DTYPES

        def widen(x):
            """float64 (complex128) copy of a floating (complex, integer) sample tensor."""
            if not isinstance(x, torch.Tensor):
                return x
            if x.is_complex():
                return x.to(torch.complex128)
            if x.is_floating_point() or (widen_ints and x.dtype != torch.bool):
                return x.double()
            return x
        s = self.sample
        if self.dtype == "float64":
            scipy = None if self.grad else _scipy_result(self.op, s)
            return None if scipy is None else {"out": scipy, "grads": None}
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
        if self.dtype not in ARBITRATED_DTYPES and not (self.dtype == "float64" and part == "out"
                                                        and getattr(self.op, "name", None) in _SCIPY):
            return False
        if self.dtype in INTEGRAL_DTYPES and not all(
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
                   and (r.is_floating_point() or r.is_complex())
                   and (e.is_floating_point() or e.is_complex()) else r
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
        if all(isinstance(t, torch.Tensor) and t.is_complex() for t in (actual, expected, ref)):
            actual, expected, ref = (torch.view_as_real(t.detach().cpu().resolve_conj())
                                     for t in (actual, expected, ref))
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
