"""`out=` into a strided view (issue 43): every op whose `out=` overload has a neuron kernel of its
own (native or composed on the host, as `torchneuron.ops` places it) and an OpInfo in PyTorch's
op_db runs with `out=` a non-contiguous view (a transposed, gapped slice of a larger tensor, at
an offset) on neuron and on the CPU; the values written and the rest of the larger tensor must
match, so a write to the wrong places or a missed write fails. Plus arange / linspace / logspace
cases written out, which issue 43 found."""

import functools
import itertools
import time

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

import torchneuron  # noqa: F401
from torchneuron import ops as coverage

# Samples taken per OpInfo, and recorded calls replayed per out= overload.
SAMPLES_PER_OP = 2
CALLS_PER_OVERLOAD = 2

# Ops whose values are random: only the untouched part of the larger tensor is compared.
RANDOM = {"normal", "bernoulli", "multinomial", "rand", "randn", "randint", "randperm", "uniform", "poisson",
          "exponential", "geometric", "cauchy", "log_normal", "random", "binomial", "rrelu_with_noise",
          "native_dropout", "_fused_dropout"}


# Outputs that hold scratch for a backward rather than a result: what goes there is the kernel's own.
SCRATCH_OUTPUTS = {"log_sigmoid_forward": {"buffer"}}

# Decompositions whose vectors are unique only up to sign: LAPACK implementations choose
# differently (CPU's MKL, neuron's OpenBLAS), so their reference is neuron's own functional result.
SIGN_FREE = {"_linalg_svd": "_linalg_svd", "_linalg_eigh": "_linalg_eigh"}


def out_arguments(schema):
    """The names of a schema's out= arguments (keyword-only, written to)."""
    return [a.name for a in schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


@functools.lru_cache(maxsize=None)
def native_out_overloads():
    """{functional aten overload name: its out= overload}, for every out= overload that neuron runs
    with a kernel of its own (native, or composed on the host of native ops)."""
    table = {}
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        packet_name, _, overload = name[len("aten::"):].partition(".")
        try:
            schema = torch._C._get_schema("aten::" + packet_name, overload)
        except RuntimeError:
            continue
        outs = out_arguments(schema)
        if not outs or coverage.placement(name) not in ("native", "composite"):
            continue
        inputs = [(a.name, str(a.type)) for a in schema.arguments if a.name not in outs]
        packet = getattr(torch.ops.aten, packet_name)
        for functional in packet.overloads():
            candidate = getattr(packet, functional)._schema
            if out_arguments(candidate) or candidate.is_mutable:
                continue
            if [(a.name, str(a.type)) for a in candidate.arguments] == inputs:
                table[f"{packet_name}.{functional}"] = getattr(packet, overload or "default")
    return table


class Recorder(TorchDispatchMode):
    """Records the CPU calls of functional aten overloads that have a native out= overload, with
    copies of their arguments and results."""

    def __init__(self, calls):
        super().__init__()
        self.calls = calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        name = f"{func._schema.name.partition('::')[2]}.{func._overloadname}"
        out_op = native_out_overloads().get(name)
        if out_op is not None and len(self.calls.get(out_op, ())) < CALLS_PER_OVERLOAD:
            results, _ = tree_flatten(result)
            if results and all(isinstance(r, torch.Tensor) and r.numel() > 0 for r in results):
                copied = tree_map(lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t, (args, kwargs))
                self.calls.setdefault(out_op, []).append((copied, [r.detach().clone() for r in results]))
        return result


def pick_dtype(op):
    dtypes = op.supported_dtypes("cpu")
    for dtype in (torch.float32, torch.int64, torch.bool, torch.complex64):
        if dtype in dtypes:
            return dtype
    return None


def _grad(shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).requires_grad_()


F = torch.nn.functional

# Calls that reach out= overloads op_db's first samples do not (run forward and backward too).
EXTRA_CALLS = [
    lambda: F.interpolate(_grad((1, 2, 3, 4)), scale_factor=2, mode="nearest"),
    lambda: F.interpolate(_grad((1, 2, 3, 4)), scale_factor=1.5, mode="nearest-exact"),
    lambda: F.interpolate(_grad((1, 2, 3, 4)), size=(5, 7), mode="bicubic", antialias=True),
    lambda: F.interpolate(_grad((1, 2, 2, 3, 4)), scale_factor=2, mode="nearest"),
    lambda: F.interpolate(_grad((1, 2, 2, 3, 4)), scale_factor=1.5, mode="nearest-exact"),
    lambda: F.pad(_grad((1, 2, 4, 5)), (1, 2, 2, 1), mode="reflect"),
    lambda: F.pad(_grad((1, 2, 3, 4, 5)), (1, 2, 2, 1, 1, 1), mode="reflect"),
    lambda: F.pad(_grad((1, 2, 3, 4, 5)), (1, 2, 2, 1, 1, 1), mode="replicate"),
    lambda: F.unfold(_grad((1, 2, 5, 6)), kernel_size=(2, 3), padding=1, stride=(1, 2)),
    lambda: F.fold(_grad((1, 12, 9)), output_size=(4, 5), kernel_size=(2, 3)),
    lambda: F.nll_loss(torch.log_softmax(_grad((2, 3, 4, 5)), 1), torch.randint(0, 3, (2, 4, 5)), reduction="none"),
    lambda: torch.logcumsumexp(_grad((3, 4)), 1),
    lambda: torch.all(torch.randn(3, 4, 5) > 0, dim=(0, 2)),
    lambda: torch.any(torch.randn(3, 4, 5) > 0, dim=(0, 2)),
    lambda: torch.cholesky_inverse(torch.tril(torch.rand(4, 4)) + 4 * torch.eye(4)),
    lambda: torch.clamp(_grad((3, 4)), min=torch.randn(3, 4), max=torch.randn(4).abs() + 1),
    lambda: torch.clamp(_grad((3, 4)), max=torch.randn(4)),
    lambda: torch.clamp(_grad((3, 4)), min=-0.5, max=0.5),
    lambda: torch.clamp(_grad((3, 4)), max=0.5),
    lambda: torch.conj_physical(torch.randn(3, 4, dtype=torch.complex64)),
    lambda: torch.lerp(_grad((3, 4)), torch.randn(3, 4), torch.rand(3, 4)),
    lambda: torch.norm(_grad((3, 4)), p=2, dim=1, dtype=torch.float64),
    lambda: torch.zeros(3, 4).scatter(0, torch.tensor([[0, 1, 2, 0]]), torch.randn(1, 4), reduce="add"),
    lambda: torch.searchsorted(torch.arange(6.0), torch.randn(3, 4) * 3),
    lambda: torch.searchsorted(torch.arange(6.0), 2.5),
    lambda: torch.sort(torch.randint(0, 3, (4, 5)).float(), dim=1, stable=True),
]


@functools.lru_cache(maxsize=None)
def recorded_calls():
    """{out= overload: [((args, kwargs), [each result])]}, from the first samples
    of every OpInfo in op_db and from EXTRA_CALLS, run forward and (where they have one) backward
    on the CPU."""
    calls = {}
    for op in op_db:
        dtype = pick_dtype(op)
        if dtype is None:
            continue
        try:
            samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=op.supports_autograd and (
                dtype.is_floating_point or dtype.is_complex)), SAMPLES_PER_OP))
        except Exception:  # noqa: BLE001  (an OpInfo that cannot make samples here covers nothing)
            continue
        for sample in samples:
            with Recorder(calls):
                try:
                    result = op(sample.input, *sample.args, **sample.kwargs)
                    outputs = [r for r in tree_flatten(result)[0] if isinstance(r, torch.Tensor) and r.requires_grad]
                    if outputs:
                        torch.autograd.backward(outputs, [torch.ones_like(r) for r in outputs])
                except Exception:  # noqa: BLE001  (a sample the CPU refuses records what ran before)
                    pass
    for make in EXTRA_CALLS:
        with Recorder(calls):
            result = make()
            outputs = [r for r in tree_flatten(result)[0] if isinstance(r, torch.Tensor) and r.requires_grad]
            if outputs:
                torch.autograd.backward(outputs, [torch.ones_like(r) for r in outputs])
    return calls


# Layouts of the out= view: each a function of the shape giving (strides, offset) in a larger
# tensor. Transposed with gaps, transposed dense (a permutation, as channels-last is), and
# row-major with a gap after each row (a narrowed slice).
def transposed(shape, gap):
    strides, step = [], gap
    for size in shape:  # the first dim fastest
        strides.append(step)
        step *= max(size, 1)
    return strides, 1


def narrowed(shape):
    strides, step = [], 1
    for d, size in reversed(list(enumerate(shape))):
        strides.insert(0, step)
        step *= max(size, 1) + (3 if d == len(shape) - 1 else 0)
    return strides, 2


LAYOUTS = {"transposed": lambda shape: transposed(shape, 2), "permuted": lambda shape: transposed(shape, 1),
           "narrowed": narrowed}


def strided_out(shape, dtype, layout, seed):
    """A view of (shape, dtype) in `layout` over a larger random tensor: (base, view arguments)."""
    shape = tuple(shape)
    strides, offset = LAYOUTS[layout](shape)
    numel = offset + 1 + sum((size - 1) * stride for size, stride in zip(shape, strides)) + 3
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(numel, generator=g, dtype=torch.float64)
    if dtype == torch.bool:
        base = values > 0
    elif dtype.is_complex:
        base = torch.complex(values, values.flip(0)).to(dtype)
    elif dtype.is_floating_point:
        base = values.to(dtype)
    else:
        base = (values * 10).to(dtype)
    return base, (shape, tuple(strides), offset)


def written_mask(base, view_args):
    """True where the view over `base` reaches."""
    mask = torch.zeros(base.numel(), dtype=torch.bool)
    mask.as_strided(*view_args).fill_(True)
    return mask


def to_neuron(value):
    if isinstance(value, torch.Tensor):
        return value.to("neuron")
    return torch.device("neuron") if isinstance(value, torch.device) else value


def replay(out_op, arguments, results, layout, seed):
    """Runs `out_op` on neuron with out= strided views over larger tensors; returns a failure
    message, None when each larger tensor holds exactly the functional CPU result in the view's
    places and its old values elsewhere, or "skip" when the CPU refuses such an out=.

    The reference is the functional result copied into the view, not the CPU's own out= call:
    some CPU out= kernels (_softmax.out, gelu.out in torch 2.13) write a strided out as if it
    were contiguous."""
    args, kwargs = arguments
    names = out_arguments(out_op._schema)
    bases = [strided_out(r.shape, r.dtype, layout, seed + i) for i, r in enumerate(results)]
    try:
        out_op(*args, **kwargs, **{n: b.clone().as_strided(*view) for n, (b, view) in zip(names, bases)})
    except Exception:  # noqa: BLE001  (the CPU refuses this out=: nothing to compare)
        return "skip"
    neuron_args, neuron_kwargs = tree_map(to_neuron, (args, kwargs))
    sign_free = SIGN_FREE.get(out_op._schema.name.partition("::")[2])
    if sign_free is not None:
        results = [r.cpu() for r in getattr(torch.ops.aten, sign_free).default(*neuron_args, **neuron_kwargs)]
    expected = [b.clone() for b, _ in bases]
    for want, (_, view), result in zip(expected, bases, results):
        want.as_strided(*view).copy_(result)
    neuron_bases = [b.to("neuron") for b, _ in bases]
    neuron_out = {n: b.as_strided(*view) for n, b, (_, view) in zip(names, neuron_bases, bases)}
    try:
        out_op(*neuron_args, **neuron_kwargs, **neuron_out)
        got = [b.cpu() for b in neuron_bases]
    except Exception as e:  # noqa: BLE001
        return f"raised {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    random = out_op._schema.name.partition("::")[2] in RANDOM
    for name, got_base, want_base, (base, view) in zip(names, got, expected, bases):
        if name in SCRATCH_OUTPUTS.get(out_op._schema.name.partition("::")[2], ()):
            continue
        mask = written_mask(base, view)
        if not torch.equal(got_base[~mask], want_base[~mask]):
            return f"wrote outside the {name}= view"
        if random:
            continue
        # Loose enough for another summation order; a value written to the wrong place is off by O(1).
        exact = not (got_base.dtype.is_floating_point or got_base.dtype.is_complex)
        try:
            torch.testing.assert_close(got_base[mask], want_base[mask], rtol=0 if exact else 1e-3,
                                       atol=0 if exact else 1e-3, equal_nan=True)
        except AssertionError as e:
            return f"wrong values in the {name}= view: " + " ".join(str(e).split())[:300]
    return None


def test_every_native_out_op_writes_strided_views():
    start = time.monotonic()
    failures, covered = {}, set()
    for out_op, calls in recorded_calls().items():
        for (i, (arguments, results)), layout in itertools.product(enumerate(calls), LAYOUTS):
            message = replay(out_op, arguments, results, layout, seed=i)
            if message == "skip":
                continue
            covered.add(out_op)
            if message is not None:
                failures[f"{out_op} call {i} {layout}"] = message
    elapsed = time.monotonic() - start
    # The enumeration must reach the ops: a test that ran nothing would pass anything.
    assert len(covered) >= 150, f"only {len(covered)} out= overloads covered"
    assert not failures, "\n".join(f"{k}: {v}" for k, v in sorted(failures.items()))
    assert elapsed < 120, f"took {elapsed:.0f} s"


@pytest.mark.parametrize("factory", ["arange", "linspace", "logspace"])
@pytest.mark.parametrize("view", ["narrow", "transpose", "step"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_range_factories_into_strided_views(factory, view, dtype):
    """Issue 43: arange(0, 4, out=x.narrow(1, 1, 2)) wrote [[0, 0, 1], [2, 3, 0]]."""
    results = []
    for device in ("cpu", "neuron"):
        x = torch.full((3, 4), -7, dtype=dtype, device=device)
        out = {"narrow": lambda: x.narrow(1, 1, 2), "transpose": lambda: x[:, :2].t(), "step": lambda: x[:, ::2]}[view]()
        if factory == "arange":
            returned = torch.arange(0, 6, out=out)
        elif factory == "linspace":
            returned = torch.linspace(-1, 5, 6, out=out)
        else:
            returned = torch.logspace(0, 2, 6, out=out)
        assert returned.shape == out.shape
        results.append(x.cpu())
    torch.testing.assert_close(results[1], results[0])


@pytest.mark.parametrize("view", ["narrow", "transpose", "step"])
def test_eye_and_randperm_into_strided_views(view):
    """The factories whose out= overloads have no functional twin to record (eye, randperm)."""
    results = []
    for device in ("cpu", "neuron"):
        x = torch.full((3, 4), -7.0, device=device)
        make = {"narrow": lambda: x.narrow(1, 1, 2), "transpose": lambda: x[:, :3].t(), "step": lambda: x[:, ::2]}
        out = make[view]()
        torch.eye(out.shape[0], out.shape[1], out=out)
        results.append(x.cpu())
        y = torch.full((2, 8), -7, dtype=torch.int64, device=device)
        permutation = torch.randperm(4, out=y[1, ::2])
        assert permutation.shape == (4,) and sorted(y[1, ::2].tolist()) == [0, 1, 2, 3]
        assert (y[0] == -7).all() and (y[1, 1::2] == -7).all()
    torch.testing.assert_close(results[1], results[0])
