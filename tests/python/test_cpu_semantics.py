"""Argument checks, result dtypes and scalar conversions as CPU PyTorch has them, found by running
PyTorch's own device-generic test files on neuron (docs/conformance.md, the upstream record)."""

import itertools
import re

import pytest
import torch

DEV = "neuron"


def _raises_like_cpu(fn, *cpu_args):
    """fn raises on neuron the exception type and message it raises on CPU."""
    with pytest.raises(Exception) as on_cpu:
        fn(*cpu_args)
    with pytest.raises(type(on_cpu.value), match=re.escape(str(on_cpu.value).split("\n")[0][:40])):
        fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in cpu_args])


@pytest.mark.parametrize("op", [torch.all, torch.any])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.int64, torch.complex64])
def test_all_any_reject_non_bool_out(op, out_dtype):
    x = torch.randn(3, 4)
    _raises_like_cpu(lambda t, o: op(t, 1, out=o), x, torch.empty(3, dtype=out_dtype))
    _raises_like_cpu(lambda t, o: op(t, out=o), x, torch.empty((), dtype=out_dtype))


@pytest.mark.parametrize("op", [torch.all, torch.any])
def test_all_any_keep_uint8_out(op):
    x = torch.randn(3, 4).gt(0)
    out = torch.empty(3, dtype=torch.uint8, device=DEV)
    op(x.to(DEV), 1, out=out)
    assert torch.equal(out.cpu(), op(x, 1).to(torch.uint8))


@pytest.mark.parametrize("op", [torch.isposinf, torch.isneginf])
def test_isposinf_rejects_non_bool_out(op):
    _raises_like_cpu(lambda t, o: op(t, out=o), torch.tensor([1.0, float("inf")]), torch.empty(2))


def test_heaviside_rejects_complex_out():
    real = torch.randn(3)
    _raises_like_cpu(lambda a, o: torch.heaviside(a, a, out=o), real, torch.empty(3, dtype=torch.complex64))


DTYPES = [torch.bool, torch.int32, torch.float32, torch.float64]


@pytest.mark.parametrize("dtypes", list(itertools.product(DTYPES, repeat=3)))
def test_clamp_tensor_bounds_result_dtype(dtypes):
    torch.manual_seed(0)

    def make(dtype):
        return torch.randint(0, 10, (4,)).to(dtype) if dtype != torch.float32 else torch.randn(4)

    x, lo, hi = (make(d) for d in dtypes)
    try:
        expected = torch.clamp(x, lo, hi)
    except RuntimeError:
        _raises_like_cpu(torch.clamp, x, lo, hi)
        return
    actual = torch.clamp(x.to(DEV), lo.to(DEV), hi.to(DEV))
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize(
    "dtype,scalar", [(torch.float16, 100000), (torch.float16, 1e6), (torch.uint8, 1000), (torch.int8, 300),
                     (torch.bfloat16, 1e39), (torch.int32, 2**40)])
def test_wrapped_scalar_is_cast_without_overflow_check(dtype, scalar):
    x = torch.tensor([1, 2, 3]).to(dtype)
    for fn in (lambda t: t + scalar, lambda t: t * scalar, lambda t: t - scalar):
        expected = fn(x)
        actual = fn(x.to(DEV)).cpu()
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, equal_nan=True)


def test_index_fill_with_cpu_index():
    x = torch.randn(4, 5)
    index = torch.tensor([0, 3])
    expected = x.index_fill(1, index, -2.0)
    assert torch.equal(x.to(DEV).index_fill(1, index, -2.0).cpu(), expected)
    assert torch.equal(x.to(DEV).index_fill_(1, index, torch.tensor(-2.0)).cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("steps", [0, 1, 2, 7, 50])
def test_complex_linspace_and_logspace(dtype, steps):
    start, end = complex(1, -2), complex(-3, 5)
    expected = torch.linspace(start, end, steps, dtype=dtype)
    torch.testing.assert_close(torch.linspace(start, end, steps, dtype=dtype, device=DEV).cpu(), expected)
    torch.testing.assert_close(torch.logspace(start, end, steps, dtype=dtype, device=DEV).cpu(),
                               torch.logspace(start, end, steps, dtype=dtype))


@pytest.mark.parametrize("op", [torch.addcmul, torch.addcdiv])
def test_addcmul_addcdiv_complex_value(op):
    torch.manual_seed(0)
    a, b, c = (torch.randn(5, dtype=torch.complex64) for _ in range(3))
    expected = op(a, b, c, value=2 - 3j)
    torch.testing.assert_close(op(a.to(DEV), b.to(DEV), c.to(DEV), value=2 - 3j).cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("shape", [(50, 3), (2, 3, 5, 5), (40, 7, 9)])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_and_cross_entropy_round_as_cpu(dtype, reduction, shape, weighted):
    # CPU sums the losses in the storage dtype by a cascade of partial sums; with weights of both
    # signs the mean's divisor is small, so float accumulation would differ by far more than an ulp.
    torch.manual_seed(1)
    x = (torch.randn(shape) * 4).to(dtype)
    target = torch.randint(0, shape[1], (shape[0],) + tuple(shape[2:]))
    target[::7] = -100
    weight = (torch.randn(shape[1]) * 3).to(dtype) if weighted else None
    log_probs = torch.log_softmax(x, 1)
    on_dev = lambda t: None if t is None else t.to(DEV)  # noqa: E731
    for fn, inp in ((torch.nn.functional.nll_loss, log_probs), (torch.nn.functional.cross_entropy, x)):
        expected = fn(inp, target, weight=weight, reduction=reduction)
        actual = fn(inp.to(DEV), target.to(DEV), weight=on_dev(weight), reduction=reduction).cpu()
        if fn is torch.nn.functional.nll_loss:
            assert torch.equal(actual, expected), (actual, expected)
        else:  # log_softmax itself may differ by an ulp of its own
            torch.testing.assert_close(actual, expected, atol=1e-2, rtol=2e-3)


def test_uint8_mask_index_warns_as_cpu():
    import warnings

    v = torch.tensor([True, False, True])
    mask = torch.tensor([1, 0, 0], dtype=torch.uint8)
    for device in ("cpu", DEV):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = v.to(device)[mask.to(device)]
        assert out.cpu().tolist() == [True]
        assert [str(w.message) for w in caught if "uint8" in str(w.message)], device


def test_index_errors_raised_at_the_call_as_cpu():
    x = torch.empty(10, 0)
    _raises_like_cpu(lambda t: t[:, [0, 1]], x)  # a dim of size 0: any index is out of bounds
    y = torch.randn(5, 3)
    # CPU index tensors are read on the host and checked at the call (Python lists arrive on the
    # device and are checked there, at the next synchronization, as on CUDA).
    _raises_like_cpu(lambda t: t[torch.tensor([0, 7])], y)
    _raises_like_cpu(lambda t: t[torch.tensor([0, -6])], y)
    _raises_like_cpu(lambda t: t[:, torch.tensor([1, 3])], y)
    assert torch.equal(y.to(DEV)[[0, -5, 4]].cpu(), y[[0, -5, 4]])
    assert x.to(DEV)[[1, 2]].shape == (2, 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_uniform_range_checks_as_cpu(dtype):
    big = torch.finfo(dtype).max
    _raises_like_cpu(lambda t: t.uniform_(-big, big), torch.empty(3, dtype=dtype))
    _raises_like_cpu(lambda t: t.uniform_(1, 0), torch.empty(3, dtype=dtype))
    _raises_like_cpu(lambda t: t.uniform_(-1e300, 0), torch.empty(3, dtype=dtype))


def test_pooling_zero_stride_and_embedding_bag_weight_dtype_messages():
    with pytest.raises(RuntimeError, match="stride should not be zero"):
        torch.nn.functional.max_pool2d(torch.randn(1, 1, 4, 4, device=DEV), 2, stride=0)
    bag = torch.nn.EmbeddingBag(5, 2, mode="sum").to(DEV)
    idx = torch.tensor([1, 2, 3], device=DEV)
    with pytest.raises(RuntimeError, match="expected scalar type.*same type as"):
        bag(idx, torch.tensor([0], device=DEV), torch.ones(3, dtype=torch.float64, device=DEV))


@pytest.mark.parametrize("fmt", [torch.channels_last, torch.contiguous_format])
def test_cat_keeps_the_inputs_memory_format(fmt):
    a = torch.randn(2, 3, 4, 5).to(memory_format=fmt)
    for parts, dim in (([a, a], 1), ([a, a], 0), ([a, a.contiguous()], 0), ([a, a[:, :2]], 1)):
        expected = torch.cat(parts, dim)
        actual = torch.cat([p.to(DEV) for p in parts], dim)
        assert actual.stride() == expected.stride()
        assert torch.equal(actual.cpu(), expected)


def test_index_shape_errors_as_cpu():
    a = torch.ones(2, 3, 4)
    _raises_like_cpu(lambda t: t[False, [0, 1], ...], a)  # IndexError: shapes [0], [2] do not broadcast
    assert a.to(DEV)[True, [0, 1], True, True, [1], [[2]]].shape == a[True, [0, 1], True, True, [1], [[2]]].shape

    def assign(t, v):
        t[t > -1] = v.to(t.device)

    _raises_like_cpu(assign, torch.arange(4), torch.tensor([1.0, 2.0, 3.0]))  # the shape is checked first


def test_cat_into_an_overlapping_out_raises_as_cpu():
    # Built on each device (moving an expanded tensor would materialize it).
    for device in ("cpu", DEV):
        x = torch.rand(1, 3, device=device).expand(6, 3)
        y = torch.rand(3, 3, device=device)
        with pytest.raises(RuntimeError, match="unsupported operation: more than one element"):
            torch.cat([y, y], out=x)
        z = torch.rand(6, 3, device=device)
        with pytest.raises(RuntimeError, match="unsupported operation: some elements of the input tensor"):
            torch.cat([z[:3], z[3:]], out=z)


@pytest.mark.parametrize("fn", [torch.nn.functional.adaptive_avg_pool2d, torch.nn.functional.adaptive_max_pool2d])
def test_adaptive_pooling_zero_output_size_backward_raises_as_cpu(fn):
    def run(t):
        fn(t.requires_grad_(), 0).sum().backward()

    _raises_like_cpu(run, torch.randn(1, 4, 10, 9))


def test_arange_counts_large_integer_steps_exactly():
    w = 1449629115440469
    for args in ((0, 100 * w, w), (100 * w, 0, -w), (0, 10, 3), (-7, 8, 5)):
        expected = torch.arange(*args)
        actual = torch.arange(*args, device=DEV)
        assert actual.numel() == expected.numel(), args
        assert torch.equal(actual.cpu(), expected)


def test_linspace_rejects_an_overlapping_out():
    for device in ("cpu", DEV):
        x = torch.rand(1, device=device).expand(10)
        with pytest.raises(RuntimeError, match="unsupported operation"):
            torch.linspace(1, 10, 10, out=x)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.complex64])
def test_copy_into_lazily_negated_or_conjugated_destination(dtype):
    # The destination's lazy negation / conjugation is honoured, as on CPU (it was written raw).
    torch.manual_seed(0)
    src0 = torch.randn(5, 6).to(dtype).t() if not dtype.is_complex else torch.randn(5, 6, dtype=dtype).t()
    results = {}
    for device in ("cpu", DEV):
        src, dst, out = src0.to(device), torch.empty(6, 5, dtype=dtype, device=device), []
        dst._neg_view().copy_(src)
        out.append(dst.cpu().clone())
        dst._neg_view().copy_(src._neg_view())
        out.append(dst.cpu().clone())
        if dtype.is_complex:
            dst.conj().copy_(src)
            out.append(dst.cpu().clone())
        host = torch.empty(6, 5, dtype=dtype)
        host._neg_view().copy_(src)
        out.append(host)
        results[device] = out
    for expected, actual in zip(results["cpu"], results[DEV]):
        assert torch.equal(actual, expected)


@pytest.mark.parametrize("dim", [0, 1])
def test_gather_scatter_with_an_index_narrower_than_the_data(dim):
    # An index whose dims after `dim` are all 1 while the data's are wider (it wrote and read
    # along the wrong dim: a silent wrong answer; PyTorch's test_scatter_add_to_large_input).
    data = torch.arange(16.0).view(4, 4)
    index = torch.tensor([[1], [2]]) if dim == 0 else torch.tensor([[1, 3]])
    src = torch.arange(1.0, 5.0).view(2, 2) if dim == 0 else torch.arange(1.0, 5.0).view(1, 4)
    assert torch.equal(data.to(DEV).gather(dim, index.to(DEV)).cpu(), data.gather(dim, index))
    for fn in ("scatter_", "scatter_add_"):
        expected = getattr(torch.zeros(4, 4), fn)(dim, index, src)
        actual = getattr(torch.zeros(4, 4, device=DEV), fn)(dim, index.to(DEV), src.to(DEV))
        assert torch.equal(actual.cpu(), expected)
    expected = torch.zeros(4, 4).scatter_reduce_(dim, index, src, "amax", include_self=False)
    actual = torch.zeros(4, 4, device=DEV).scatter_reduce_(dim, index.to(DEV), src.to(DEV), "amax", include_self=False)
    assert torch.equal(actual.cpu(), expected)


@pytest.mark.parametrize("target_shape", [(), (1,)])
@pytest.mark.parametrize("source_shape", [(), (1,)])
def test_index_copy_mixes_0dim_and_one_element(target_shape, source_shape):
    # As CPU: the shapes without the indexed dim must match, and a 0-dim tensor's is empty.
    target, source = torch.zeros(target_shape), torch.full(source_shape, 7.0)
    idx = torch.zeros(1, dtype=torch.long)
    expected = target.clone().index_copy_(0, idx, source)
    got = target.to(DEV).index_copy_(0, idx.to(DEV), source.to(DEV))
    assert got.shape == expected.shape and torch.equal(got.cpu(), expected)


def test_index_copy_count_mismatch_raises_like_cpu():
    _raises_like_cpu(lambda t, i, s: t.index_copy_(0, i, s), torch.zeros(3, 4), torch.tensor([0, 1]),
                     torch.ones(3, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_index_fill_rejects_a_complex_scalar(dtype):
    _raises_like_cpu(lambda t, i: t.index_fill_(1, i, 1 + 1j), torch.ones(2, 2, dtype=dtype), torch.tensor([0]))


def test_arange_out_of_another_size_warns_and_resizes_like_cpu():
    def run(device):
        out = torch.zeros(1, 49, device=device)
        with pytest.warns(UserWarning, match="The out tensor will be resized to a tensor of shape \\(50,\\)"):
            torch.arange(-1, 1, 2.0 / 49, dtype=torch.float32, out=out)
        return out
    expected, got = run("cpu"), run(DEV)
    assert got.shape == expected.shape == (50,)
    # CPU rounds each vector's first element to float32 first; neuron rounds start + i * step once.
    torch.testing.assert_close(got.cpu(), expected)


def test_arange_of_too_many_elements_raises_like_cpu():
    _raises_like_cpu(lambda t: torch.arange(1.175494351e-38, 3.402823466e38, device=t.device), torch.empty(1))


@pytest.mark.parametrize("op", [torch.linspace, torch.logspace])
def test_lin_logspace_reject_an_overlapping_out(op):
    _raises_like_cpu(lambda x: op(1, 10, 10, out=x.expand(10)), torch.rand(1))
    out = torch.empty(10, device=DEV)
    torch.testing.assert_close(op(1, 10, 10, out=out).cpu(), op(1, 10, 10))


@pytest.mark.parametrize("op", [lambda t: t.amax(0), lambda t: t.amin([0, 2]), lambda t: t.argmax(0),
                                lambda t: t.argmin(0), lambda t: t.max(0), lambda t: t.min(0),
                                lambda t: t.median(0), lambda t: t.kthvalue(1, 0)])
def test_reducing_an_empty_dim_raises_index_error_like_cpu(op):
    _raises_like_cpu(op, torch.randn(0, 2, 3))


@pytest.mark.parametrize("op", [torch.max, torch.min])
@pytest.mark.parametrize("dtypes", [(torch.int32, torch.long), (torch.float32, torch.float64),
                                    (torch.int32, torch.float64)])
def test_max_min_dim_reject_out_of_another_dtype(op, dtypes):
    _raises_like_cpu(lambda x, v, i: op(x, dim=0, out=(v, i)), torch.randn(5, 5), torch.empty(5, dtype=dtypes[0]),
                     torch.empty(5, dtype=dtypes[1]))


def test_searchsorted_notes_a_non_contiguous_operand_like_cpu():
    boundaries = torch.arange(12.0).view(3, 4).t()  # non-contiguous, each row sorted
    values = torch.tensor([[1.5], [4.0], [7.5], [10.0]])
    torch.set_warn_always(True)  # CPU warns once per program; here every time, on both devices
    try:
        for device in ("cpu", DEV):
            with pytest.warns(UserWarning, match="boundary tensor is non-contiguous"):
                got = torch.searchsorted(boundaries.to(device), values.to(device))
            assert torch.equal(got.cpu(), torch.searchsorted(boundaries.contiguous(), values))
    finally:
        torch.set_warn_always(False)


@pytest.mark.parametrize("case", ["put_y0", "put_ind", "put_y3", "scatter_src", "scatter_ind", "scatter_add_src",
                                  "index_fill_ind", "index_put_y0", "index_put_ind", "index_put_y3"])
def test_in_place_writes_reject_an_overlapping_input_like_cpu(case):
    ops = {
        "put_y0": lambda y, ind: y.put_(ind[0], y[0]),
        "put_ind": lambda y, ind: ind.put_(ind, ind),
        "put_y3": lambda y, ind: y.put_(ind, y[:3]),
        "scatter_src": lambda y, ind: y[:3].scatter_(0, ind, y[:3]),
        "scatter_ind": lambda y, ind: ind.scatter_(0, ind, ind.clone()),
        "scatter_add_src": lambda y, ind: y[:3].scatter_add_(0, ind, y[1:4]),
        "index_fill_ind": lambda y, ind: ind.index_fill_(0, ind, 0),
        "index_put_y0": lambda y, ind: y.index_put_((ind,), y[0]),
        "index_put_ind": lambda y, ind: ind.index_put_((ind,), ind),
        "index_put_y3": lambda y, ind: y.index_put_((ind,), y[:3]),
    }
    _raises_like_cpu(ops[case], torch.rand(6), torch.tensor([2, 1, 0]))


def test_is_set_to_compares_storage_like_cpu():
    def answers(device):
        t1, t2 = torch.empty(3, 4, 9, 10, device=device), torch.empty(3, 4, 9, 10, device=device)
        t3 = torch.tensor([], device=device).set_(t1)
        t4 = t3.clone().resize_(12, 90)
        return [t1.is_set_to(t2), t1.is_set_to(t3), t3.is_set_to(t1), t1.is_set_to(t4), t1[1:].is_set_to(t1)]
    assert answers(DEV) == answers("cpu") == [False, True, True, False, False]


@pytest.mark.parametrize("accumulate", [False, True])
def test_put_alerts_nondeterminism_like_cpu(accumulate):
    def alerts(device):
        a = torch.randn(10, device=device)
        index, values = torch.tensor([0, 0], device=device), torch.tensor([0.0, 1.0], device=device)
        torch.use_deterministic_algorithms(True)
        try:
            a.put_(index, values, accumulate=accumulate)
            return False
        except RuntimeError as e:
            return "does not have a deterministic implementation" in str(e)
        finally:
            torch.use_deterministic_algorithms(False)
    assert alerts(DEV) == alerts("cpu") == (not accumulate)


def test_argmax_of_an_empty_tensor_without_dim_raises_index_error_like_cpu():
    _raises_like_cpu(lambda t: t.argmax(), torch.empty(0))
    _raises_like_cpu(lambda t: t.argmin(), torch.empty(0, 3))


def test_searchsorted_scalar_value_needs_1d_boundaries_like_cpu():
    _raises_like_cpu(lambda b, v: torch.searchsorted(b, v), torch.tensor([[1.0, 2.0]]), torch.tensor(1.5))
    _raises_like_cpu(lambda b: torch.searchsorted(b, 1.5), torch.tensor([[1.0, 2.0]]))


@pytest.mark.parametrize("out_dtype,out_int32", [(torch.float32, False), (torch.int64, True), (torch.int32, False)])
def test_searchsorted_out_of_the_wrong_dtype_raises_like_cpu(out_dtype, out_int32):
    _raises_like_cpu(lambda v, o: torch.searchsorted(v, v, out=o, out_int32=out_int32), torch.tensor([1, 2, 3]),
                     torch.empty(3, dtype=out_dtype))
