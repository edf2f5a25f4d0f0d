"""Native normalization, pooling and upsampling operators against CPU PyTorch, forward and
backward: batch norm (train and eval, running statistics, mixed precision), group norm,
2-D and 3-D max / average pooling, adaptive average and max pooling, upsampling (nearest, nearest-exact, linear,
bilinear, bicubic, trilinear), grid_sample, and nn.Unfold / nn.Fold (im2col / col2im)."""

import pytest
import torch
import torch.nn.functional as F

import torchneuron

from test_nn_ops import assert_same, sample


def compare(fn, *inputs, tol=1e-5, grad_out_seed=7):
    """Runs fn forward and backward (with a random upstream gradient) on CPU and neuron."""
    results = []
    for device in ("cpu", "neuron"):
        leaves = [x.detach().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
        out = fn(*leaves)
        out.backward(sample(out.shape, out.dtype, grad_out_seed).to(device))
        results.append((out.detach(), [leaf.grad for leaf in leaves if leaf.requires_grad]))
    (cpu_out, cpu_grads), (dev_out, dev_grads) = results
    assert_same(dev_out, cpu_out, tol)
    for dev, cpu in zip(dev_grads, cpu_grads):
        assert_same(dev, cpu, tol)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (6, 3), (2, 3, 7)])
def test_batch_norm_train_matches_cpu_and_updates_running_stats(dtype, shape):
    x, w, b = sample(shape, dtype, 0), sample((3,), dtype, 1), sample((3,), dtype, 2)
    stats = {}
    for device in ("cpu", "neuron"):
        mean, var = torch.zeros(3, dtype=dtype, device=device), torch.ones(3, dtype=dtype, device=device)
        F.batch_norm(x.to(device), mean, var, w.to(device), b.to(device), training=True, momentum=0.3)
        stats[device] = (mean, var)
    for dev, cpu in zip(stats["neuron"], stats["cpu"]):
        assert_same(dev, cpu)
    compare(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, w, b, tol=1e-4)


@pytest.mark.usefixtures("no_fallback")
def test_batch_norm_eval_uses_running_stats():
    x, w, b = sample((4, 3, 5, 5), seed=0), sample((3,), seed=1), sample((3,), seed=2)
    mean, var = sample((3,), seed=3), sample((3,), seed=4).abs() + 0.5
    compare(lambda x, w, b: F.batch_norm(x, mean.to(x.device), var.to(x.device), w, b, training=False), x, w, b)


@pytest.mark.usefixtures("no_fallback")
def test_batch_norm_mixed_precision_keeps_float_stats():
    # bf16 activations with float32 parameters, as under autocast: statistics stay float32.
    x = sample((4, 3, 5, 5), torch.bfloat16)
    results = {}
    for device in ("cpu", "neuron"):
        bn = torch.nn.BatchNorm2d(3).to(device)
        out = bn(x.to(device))
        results[device] = (out, bn.running_mean, bn.running_var)
    for dev, cpu in zip(results["neuron"], results["cpu"]):
        assert_same(dev, cpu)


def test_batch_norm_rejects_bad_shapes():
    x = torch.randn(4, 3, 2, device="neuron")
    with pytest.raises(RuntimeError, match="expected weight, bias and running stats of 3 elements"):
        torch.native_batch_norm(x, torch.ones(4, device="neuron"), None, None, None, True, 0.1, 1e-5)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm(torch.randn(1, 3, device="neuron"), None, None, training=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("groups,affine", [(1, True), (2, True), (4, False)])
def test_group_norm_matches_cpu(dtype, groups, affine):
    x = sample((3, 4, 5, 2), dtype)
    w, b = sample((4,), dtype, 1), sample((4,), dtype, 2)
    if affine:
        compare(lambda x, w, b: F.group_norm(x, groups, w, b), x, w, b, tol=1e-4)
    else:
        compare(lambda x: F.group_norm(x, groups), x, tol=1e-4)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1), ceil_mode=True),
])
def test_max_pool2d_matches_cpu(dtype, kwargs):
    x = sample((2, 3, 9, 8), dtype)
    compare(lambda x: F.max_pool2d(x, **kwargs), x)
    cpu_values, cpu_indices = F.max_pool2d(x, return_indices=True, **kwargs)
    values, indices = F.max_pool2d(x.to("neuron"), return_indices=True, **kwargs)
    assert torch.equal(indices.cpu(), cpu_indices)


@pytest.mark.usefixtures("no_fallback")
def test_max_pool2d_propagates_nan_and_takes_unbatched_input():
    x = sample((3, 6, 6))
    x[1, 2, 3] = float("nan")
    x[2, 0, 1] = x[2, 1, 0] = float("nan")  # two in a window: CPU records the last one
    cpu, dev = F.max_pool2d(x, 2, return_indices=True), F.max_pool2d(x.to("neuron"), 2, return_indices=True)
    assert_same(dev[0], cpu[0])
    assert torch.equal(dev[1].cpu(), cpu[1])


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_pool_wide_rows_match_cpu_values_and_indices(dims):
    """Rows wide enough for the kernel's several-windows-at-once path, beside its border windows:
    random windows, strides, dilations and paddings, with ties and NaNs, in three dtypes."""
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims]
    gen = torch.Generator().manual_seed(dims)
    pick = lambda lo, hi: int(torch.randint(lo, hi + 1, (), generator=gen))
    for case in range(24):
        kernel, stride, dilation = pick(1, 4), pick(1, 3), pick(1, 2)
        padding, ceil_mode = pick(0, kernel // 2), case % 3 == 0
        dtype = (torch.float32, torch.float64, torch.bfloat16)[case % 3]
        size = [pick(kernel * dilation, 12) for _ in range(dims - 1)] + [pick(20, 70)]
        x = torch.randn(2, 3, *size, generator=gen).to(dtype)
        if case % 4 == 1:
            x = x.round()  # ties: the first maximum's position
        if case % 4 == 2:
            x[x > 1.5] = float("nan")  # the last NaN's position
        args = (kernel, stride, padding, dilation, ceil_mode, True)
        cpu_values, cpu_indices = pool(x, *args)
        values, indices = pool(x.to("neuron"), *args)
        assert torch.equal(indices.cpu(), cpu_indices), (kernel, stride, dilation, padding, size, dtype)
        torch.testing.assert_close(values.cpu(), cpu_values, rtol=0, atol=0, equal_nan=True)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=2, divisor_override=3),
])
def test_avg_pool2d_matches_cpu(kwargs):
    compare(lambda x: F.avg_pool2d(x, **kwargs), sample((2, 3, 9, 8)))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_avg_pool_random_windows_match_cpu(dims):
    """Random windows, strides, paddings, ceil mode, count_include_pad and divisor overrides on
    rows wide enough for the row-at-a-time loops, forward and backward."""
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[dims]
    gen = torch.Generator().manual_seed(10 + dims)
    pick = lambda lo, hi: int(torch.randint(lo, hi + 1, (), generator=gen))
    for case in range(20):
        kernel, stride = pick(1, 4), pick(1, 3)
        kwargs = dict(padding=pick(0, kernel // 2), ceil_mode=case % 2 == 0, count_include_pad=case % 3 != 0)
        if dims > 1 and case % 5 == 0:
            kwargs["divisor_override"] = 3
        dtype = (torch.float32, torch.float64, torch.bfloat16)[case % (2 if dims == 3 else 3)]  # no CPU bfloat16 avg_pool3d
        size = [pick(kernel, 9) for _ in range(dims - 1)] + [pick(kernel + 16, 60)]
        x = torch.randn(2, 3, *size, generator=gen).to(dtype)
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
        compare(lambda x: pool(x, kernel, stride, **kwargs), x, tol=tol)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("output_size", [(1, 1), (3, 4), (5, 7)])
def test_adaptive_avg_pool2d_matches_cpu(output_size):
    compare(lambda x: F.adaptive_avg_pool2d(x, output_size), sample((2, 3, 9, 8)))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kwargs", [
    dict(scale_factor=2, mode="nearest"),
    dict(size=(7, 5), mode="nearest"),
    dict(scale_factor=2, mode="bilinear"),
    dict(size=(7, 11), mode="bilinear", align_corners=True),
    dict(scale_factor=0.5, mode="bilinear"),
    dict(scale_factor=1.7, mode="bilinear"),
])
def test_upsample_matches_cpu(dtype, kwargs):
    compare(lambda x: F.interpolate(x, **kwargs), sample((2, 3, 6, 4), dtype), tol=1e-5)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape, kwargs", [
    ((2, 3, 7), dict(size=13, mode="linear")),
    ((2, 3, 7), dict(size=4, mode="linear", align_corners=True)),
    ((2, 3, 7), dict(scale_factor=1.7, mode="linear")),
    ((2, 3, 7), dict(size=12, mode="nearest")),
    ((2, 3, 7), dict(size=5, mode="nearest-exact")),
    ((2, 3, 5, 6), dict(size=(9, 11), mode="bicubic")),
    ((2, 3, 5, 6), dict(size=(3, 4), mode="bicubic", align_corners=True)),
    ((2, 3, 5, 6), dict(scale_factor=1.7, mode="bicubic")),
    ((2, 3, 1, 6), dict(size=(4, 1), mode="bicubic")),
    ((2, 3, 5, 6), dict(size=(7, 13), mode="nearest-exact")),
    ((1, 2, 3, 4, 5), dict(size=(5, 7, 9), mode="trilinear")),
    ((1, 2, 3, 4, 5), dict(size=(2, 3, 4), mode="trilinear", align_corners=True)),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="nearest")),
    ((1, 2, 3, 4, 5), dict(size=(4, 6, 7), mode="nearest-exact")),
], ids=lambda v: v["mode"] + str(v.get("size", v.get("scale_factor"))) if isinstance(v, dict) else None)
def test_upsample_1d_3d_bicubic_and_nearest_exact_match_cpu(dtype, shape, kwargs):
    # Bicubic reads taps beyond the edges (clamped) and has negative weights; the half types
    # accumulate in float, as CPU PyTorch does.
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    compare(lambda x: F.interpolate(x, **kwargs), sample(shape, dtype), tol=tol)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kwargs", [dict(size=(5, 9)), dict(size=(13, 40)), dict(size=(4, 17), align_corners=True),
                                    dict(scale_factor=0.37), dict(size=(1, 1))], ids=str)
def test_antialiased_resize_matches_cpu(dtype, mode, kwargs):
    # Downsampling widens the filter to (scale x) 2 or 4 taps per axis; upsampling keeps it.
    # CPU PyTorch has no bfloat16 kernel here.
    compare(lambda x: F.interpolate(x, mode=mode, antialias=True, **kwargs), sample((2, 3, 24, 20), dtype), tol=1e-5)


def test_upsample_nearest_copies_uint8_and_keeps_channels_last_3d():
    image = torch.randint(0, 256, (2, 3, 5, 6), dtype=torch.uint8)
    for mode in ("nearest", "nearest-exact"):
        assert torch.equal(F.interpolate(image.to("neuron"), size=(9, 13), mode=mode).cpu(),
                           F.interpolate(image, size=(9, 13), mode=mode))
    volume = sample((1, 2, 3, 4, 5)).contiguous(memory_format=torch.channels_last_3d)
    outs = [F.interpolate(volume.to(device), scale_factor=2, mode="trilinear") for device in ("cpu", "neuron")]
    assert outs[1].stride() == outs[0].stride()
    assert_same(outs[1], outs[0])


def test_upsample_rejects_bad_sizes_like_cpu():
    aten = torch.ops.aten
    x = torch.randn(2, 3, 5, device="neuron")
    with pytest.raises(RuntimeError, match=r"sizes should be greater than 0, but got input \(W: 5\) and output \(W: 0\)"):
        aten.upsample_linear1d(x, [0], False)
    with pytest.raises(RuntimeError, match="It is expected input_size equals to 4, but got size 3"):
        aten.upsample_bicubic2d(x, [4, 4], False)
    with pytest.raises(RuntimeError, match="Expected grad_output to have the same shape as output"):
        aten.upsample_trilinear3d_backward(torch.randn(1, 2, 4, 4, 5, device="neuron"), [4, 4, 4], [1, 2, 3, 3, 3], False)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):  # as on CPU
        aten.upsample_linear1d(torch.ones(2, 3, 5, dtype=torch.long, device="neuron"), [4], False)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("op", [
    lambda x: F.max_pool2d(x, 2),
    lambda x: F.avg_pool2d(x, (1, 2)),
    lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
    lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
], ids=["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "upsample"])
def test_channels_last_input_gives_channels_last_output_like_cpu(op):
    # torch.compile traces with meta kernels that keep the input's memory format; a compiled
    # graph that views the result relies on those strides.
    x = sample((2, 8, 6, 10)).contiguous(memory_format=torch.channels_last)
    leaves = [x.detach().to(device).requires_grad_() for device in ("cpu", "neuron")]
    outs = [op(leaf) for leaf in leaves]
    assert outs[1].stride() == outs[0].stride()
    assert_same(outs[1].detach(), outs[0].detach())
    for out in outs:
        out.backward(torch.ones_like(out))
    assert leaves[1].grad.stride() == leaves[0].grad.stride()
    assert_same(leaves[1].grad, leaves[0].grad)


def test_pooling_rejects_bad_arguments():
    x = torch.randn(2, 3, 4, 4, device="neuron")
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.avg_pool2d(x, 5)
    with pytest.raises(RuntimeError, match="Expected 3D or 4D"):
        F.max_pool2d(torch.randn(4, 4, device="neuron"), 2)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_cpu(dtype, mode, padding_mode, align_corners):
    # Grid points inside, on the edges and well outside [-1, 1] (reflection folds them several
    # times); the input's and the grid's gradients.
    g = torch.Generator().manual_seed(5)
    x = sample((2, 3, 5, 7), dtype, 11)
    grid = (torch.rand(2, 4, 6, 2, generator=g) * 5 - 2.5)
    grid[0, 0, :3] = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 1.0]])
    fn = lambda t, q: F.grid_sample(t, q, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    if dtype != torch.bfloat16:
        compare(fn, x, grid.to(dtype))
        return
    # CPU PyTorch computes bfloat16 in bfloat16 (its grid gradient was 26 off float64 here); ours
    # computes in float, so the reference is float64 on the same bfloat16 values.
    grid = grid.to(dtype)
    upstream = sample((2, 3, 4, 6), torch.float64, 7)
    results = []
    for t, q in ((x.double(), grid.double()), (x.to("neuron"), grid.to("neuron"))):
        t, q = t.detach().requires_grad_(), q.detach().requires_grad_()
        out = fn(t, q)
        out.backward(upstream.to(out.dtype).to(out.device))
        results.append([r.detach().cpu().double() for r in (out, t.grad, q.grad)])
    for got, ref in zip(results[1], results[0]):
        torch.testing.assert_close(got, ref, atol=0.06, rtol=2e-2)


def test_spatial_transformer_and_bicubic_fallback():
    # affine_grid + grid_sample, as a spatial transformer runs them; bicubic is counted.
    theta = torch.tensor([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]]]).repeat(2, 1, 1)
    x = sample((2, 3, 8, 8), torch.float32, 3)
    torchneuron.reset_fallback_report()
    compare(lambda t, a: F.grid_sample(t, F.affine_grid(a, (2, 3, 6, 6), align_corners=False), align_corners=False), x, theta)
    assert torchneuron.fallback_report() == {}
    compare(lambda t, a: F.grid_sample(t, F.affine_grid(a, (2, 3, 6, 6), align_corners=False), mode="bicubic",
                                       align_corners=False), x, theta)
    assert set(torchneuron.fallback_report()) == {"aten::grid_sampler_2d", "aten::grid_sampler_2d_backward"}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape, kwargs", [
    ((2, 3, 6, 7), dict(kernel_size=2)),
    ((2, 3, 6, 7), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2))),
    ((3, 5, 5), dict(kernel_size=3, padding=1)),  # no batch dimension
    ((1, 2, 8, 8), dict(kernel_size=4, stride=4)),  # patches, as a ViT embeds them
])
def test_unfold_and_fold_match_cpu(dtype, shape, kwargs):
    compare(lambda x: F.unfold(x, **kwargs), sample(shape, dtype))
    columns = F.unfold(sample(shape), **kwargs).to(dtype)
    compare(lambda c: F.fold(c, shape[-2:], **kwargs), columns)  # overlapping windows sum


def test_unfold_copies_complex_and_rejects_bad_arguments_like_cpu():
    x = torch.randn(2, 3, 5, 6, dtype=torch.complex64)
    assert torch.equal(F.unfold(x.to("neuron"), 2, padding=1).cpu(), F.unfold(x, 2, padding=1))
    image = torch.randn(2, 3, 5, 6, device="neuron")
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero"):
        torch.ops.aten.im2col(image, [0, 2], [1, 1], [0, 0], [1, 1])
    with pytest.raises(RuntimeError, match=r"calculated shape of the array of sliding blocks as \(-1, 5\)"):
        torch.ops.aten.im2col(image, [7, 2], [1, 1], [0, 0], [1, 1])
    with pytest.raises(RuntimeError, match="divisible by the product of kernel_size"):
        F.fold(torch.randn(2, 10, 20, device="neuron"), (5, 6), 2)
    with pytest.raises(RuntimeError, match="match the calculated number of sliding blocks 4 \\* 5 = 20"):
        F.fold(torch.randn(2, 12, 21, device="neuron"), (5, 6), 2)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("output_size", [(1, 1), (3, 4), (5, 7), (9, 8)])
def test_adaptive_max_pool2d_matches_cpu(dtype, output_size):
    x = sample((2, 3, 9, 8), dtype)
    compare(lambda t: F.adaptive_max_pool2d(t, output_size), x)
    cpu, dev = F.adaptive_max_pool2d(x, output_size, True), F.adaptive_max_pool2d(x.to("neuron"), output_size, True)
    assert torch.equal(dev[1].cpu(), cpu[1])
    compare(lambda t: F.adaptive_max_pool1d(t, 3), sample((2, 3, 10), dtype))  # through the 2-D op


def test_adaptive_max_pool2d_nan_and_ties_pick_cpu_positions(no_fallback):
    x = torch.tensor([[[[1.0, float("nan"), 3.0], [float("nan"), 2.0, 0.0]], [[1.0, 3.0, 3.0], [2.0, 3.0, 0.0]]]])
    cpu, dev = F.adaptive_max_pool2d(x, 1, True), F.adaptive_max_pool2d(x.to("neuron"), 1, True)
    assert torch.equal(dev[1].cpu(), cpu[1])  # the last NaN; the first of equal maxima
    assert_same(dev[0], cpu[0])
    with pytest.raises(RuntimeError, match="Expected input to have non-zero size for non-batch dimensions"):
        F.adaptive_max_pool2d(torch.randn(2, 3, 0, 4, device="neuron"), 2)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=2),
    dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1)),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
])
def test_max_and_avg_pool3d_match_cpu(dtype, kwargs):
    x = sample((2, 3, 5, 6, 7), dtype)
    compare(lambda t: F.max_pool3d(t, **kwargs), x)
    for avg_kwargs in (kwargs, dict(kwargs, count_include_pad=False)):
        if dtype == torch.bfloat16:  # CPU PyTorch has no bfloat16 avg_pool3d: its float result, rounded
            assert_same(F.avg_pool3d(x.to("neuron"), **avg_kwargs), F.avg_pool3d(x.float(), **avg_kwargs).bfloat16())
        else:
            compare(lambda t: F.avg_pool3d(t, **avg_kwargs), x)
    compare(lambda t: F.max_pool3d(t, dilation=(1, 2, 1), **kwargs), x) if "padding" not in kwargs else None
    cpu, dev = F.max_pool3d(x, return_indices=True, **kwargs), F.max_pool3d(x.to("neuron"), return_indices=True, **kwargs)
    assert torch.equal(dev[1].cpu(), cpu[1])


def test_pool3d_divisor_unbatched_channels_last_and_errors(no_fallback):
    x = sample((3, 4, 4, 4))  # no batch dimension
    compare(lambda t: F.avg_pool3d(t, 2, divisor_override=3), x)
    volume = sample((1, 2, 4, 6, 6)).contiguous(memory_format=torch.channels_last_3d)
    outs = [F.max_pool3d(volume.to(device), 2) for device in ("cpu", "neuron")]
    assert outs[1].stride() == outs[0].stride()
    assert_same(outs[1], outs[0])
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.max_pool3d(torch.randn(1, 2, 1, 4, 4, device="neuron"), 2)
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        F.avg_pool3d(torch.randn(1, 2, 4, 4, 4, device="neuron"), 2, padding=2)
