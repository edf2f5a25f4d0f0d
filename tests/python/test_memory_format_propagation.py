"""Memory-format propagation: for channels_last / channels_last_3d inputs (and weights), the
results and gradients of convolutions, batch / group norm, padding, 3-D pooling and cat have the
strides CPU PyTorch gives them, and CPU's values."""

import itertools

import pytest
import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401

CL = {4: torch.channels_last, 5: torch.channels_last_3d}


def layout(t):
    """Strides of the dims longer than 1 (a size-1 dim's stride says nothing about the layout)."""
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def make(shape, fmt, dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)
    if fmt == "cl":
        t = t.contiguous(memory_format=CL[len(shape)])
    return t.to(device)


def run(fn, shapes, fmts, dtype, device, grad_fmt):
    args = [make(s, f, dtype, device, i).requires_grad_(dtype.is_floating_point) for i, (s, f) in enumerate(zip(shapes, fmts))]
    out = fn(*args)
    g = make(tuple(out.shape), grad_fmt if out.dim() in CL else "c", dtype, device, 99)
    grads = torch.autograd.grad(out, args, g)
    return out.detach(), grads


def batch_norm(training):
    def fn(x, w, b):
        c = x.shape[1]
        mean = torch.linspace(-0.5, 0.5, c, device=x.device, dtype=w.dtype)
        var = torch.linspace(0.5, 2.0, c, device=x.device, dtype=w.dtype)
        return F.batch_norm(x, mean, var, w, b, training=training)

    return fn


C, CC = ("c", "cl"), ("c",)
# name: (function, shapes, formats per argument, dtypes)
CASES = {
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [(2, 3, 5, 6), (4, 3, 3, 3), (4,)], [C, C, CC],
               (torch.float32, torch.bfloat16)),
    "conv2d_strided_groups": (lambda x, w: F.conv2d(x, w, stride=2, groups=2), [(2, 4, 7, 6), (6, 2, 3, 2)], [C, C], None),
    "conv2d_1x1_batch1": (lambda x, w: F.conv2d(x, w), [(1, 3, 4, 5), (2, 3, 1, 1)], [C, C], None),
    # 1x1 with a channels-last input: one matrix product over the pixels.
    "conv2d_1x1_bias": (lambda x, w, b: F.conv2d(x, w, b), [(2, 8, 5, 7), (6, 8, 1, 1), (6,)], [C, C, CC],
                        (torch.float32, torch.bfloat16)),
    "conv2d_1x1_strided": (lambda x, w: F.conv2d(x, w, stride=2), [(2, 8, 5, 7), (6, 8, 1, 1)], [C, C], None),
    "conv_transpose2d": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2), [(2, 3, 5, 6), (3, 4, 3, 3), (4,)], [C, C, CC], None),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b, padding=1), [(2, 3, 4, 5, 6), (4, 3, 3, 3, 3), (4,)], [C, C, CC], None),
    # Batch 1 with a small kernel: CPU's own 3-D kernels, contiguous results in float32.
    "conv3d_batch1": (lambda x, w: F.conv3d(x, w), [(1, 3, 4, 5, 6), (4, 3, 3, 3, 3)], [C, C], (torch.float32, torch.bfloat16)),
    "conv_transpose3d": (lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2), [(2, 3, 3, 4, 5), (3, 4, 3, 3, 3), (4,)], [C, C, CC], None),
    "batch_norm2d_train": (batch_norm(True), [(2, 3, 5, 6), (3,), (3,)], [C, CC, CC], None),
    "batch_norm2d_eval": (batch_norm(False), [(2, 3, 5, 6), (3,), (3,)], [C, CC, CC], None),
    "batch_norm3d_train": (batch_norm(True), [(2, 3, 4, 5, 6), (3,), (3,)], [C, CC, CC], None),
    # Over 256 rows of channels: the channels-last kernel's sums run in several chunks.
    "batch_norm2d_train_rows": (batch_norm(True), [(4, 8, 12, 12), (8,), (8,)], [C, CC, CC], (torch.float32, torch.bfloat16)),
    "batch_norm3d_eval_rows": (batch_norm(False), [(2, 5, 6, 7, 8), (5,), (5,)], [C, CC, CC], None),
    "group_norm2d": (lambda x, w, b: F.group_norm(x, 2, w, b), [(2, 4, 5, 6), (4,), (4,)], [C, CC, CC], None),
    "group_norm3d": (lambda x, w, b: F.group_norm(x, 2, w, b), [(2, 4, 3, 5, 6), (4,), (4,)], [C, CC, CC], None),
    "group_norm2d_rows": (lambda x, w, b: F.group_norm(x, 3, w, b), [(2, 6, 20, 16), (6,), (6,)], [C, CC, CC], (torch.float32, torch.bfloat16)),
    "reflection_pad2d": (lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), [(2, 3, 5, 6)], [C], None),
    "replication_pad2d": (lambda x: F.pad(x, (1, 2, 2, 1), mode="replicate"), [(2, 3, 5, 6)], [C], None),
    "reflection_pad3d": (lambda x: F.pad(x, (1, 2, 2, 1, 1, 1), mode="reflect"), [(2, 3, 4, 5, 6)], [C], None),
    "replication_pad3d": (lambda x: F.pad(x, (1, 2, 2, 1, 1, 1), mode="replicate"), [(2, 3, 4, 5, 6)], [C], None),
    # A 4-D (unbatched) input of a 3-D pad keeps its channels-last layout on CPU.
    "reflection_pad3d_unbatched": (lambda x: F.pad(x, (1, 1, 1, 1, 1, 1), mode="reflect"), [(3, 4, 5, 6)], [C], None),
    "constant_pad2d": (lambda x: F.pad(x, (1, 2, 2, 1), value=0.5), [(2, 3, 5, 6)], [C], None),
    "constant_pad_crop_and_channels": (lambda x: F.pad(x, (-1, 2, 0, 1, 1, 1), value=0.5), [(2, 3, 5, 6)], [C], None),
    "constant_pad3d": (lambda x: F.pad(x, (1, 0, 0, 2, 1, 1)), [(2, 3, 4, 5, 6)], [C], None),
    # One channel, one row: layouts that suggest_memory_format finds ambiguous.
    "reflection_pad2d_one_channel": (lambda x: F.pad(x, (1, 1, 0, 0), mode="reflect"), [(2, 1, 1, 6)], [C], None),
    "replication_pad2d_one_channel": (lambda x: F.pad(x, (1, 1, 2, 0), mode="replicate"), [(2, 1, 4, 6)], [C], None),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2), [(2, 3, 4, 5, 6)], [C], None),
    # CPU's avg_pool3d writes contiguous results whatever the input's layout.
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2), [(2, 3, 4, 5, 6)], [C], None),
    # Backwards whose CPU iterator takes the saved tensor first: its layout wins over the gradient's.
    "relu": (F.relu, [(2, 3, 4, 6)], [C], None),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), [(2, 3, 4, 6)], [C], None),
    "threshold": (lambda x: F.threshold(x, 0.1, 2.0), [(2, 3, 4, 6)], [C], None),
    "hardtanh": (F.hardtanh, [(2, 3, 4, 6)], [C], None),
    # CPU's log_sigmoid forward returns a contiguous result for any input layout.
    "logsigmoid": (F.logsigmoid, [(2, 3, 4, 6)], [C], None),
    # Upsampling: the input gradient follows grad_output's layout in these modes, not bicubic's.
    "upsample_nearest2d": (lambda x: F.interpolate(x, scale_factor=2), [(2, 3, 4, 6)], [C], None),
    "upsample_bilinear2d": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), [(2, 3, 4, 6)], [C], None),
    "upsample_bilinear2d_aa": (lambda x: F.interpolate(x, size=(3, 5), mode="bilinear", antialias=True), [(2, 3, 4, 6)], [C], None),
    "upsample_bicubic2d": (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), [(2, 3, 4, 6)], [C], None),
    "upsample_nearest3d": (lambda x: F.interpolate(x, scale_factor=2), [(2, 3, 4, 5, 6)], [C], None),
    "upsample_trilinear3d": (lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), [(2, 3, 4, 5, 6)], [C], None),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), [(2, 8, 4, 6)], [C], None),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), [(2, 3, 4, 6)], [C], None),
    "flip": (lambda x: x.flip(2, 3), [(2, 3, 4, 6)], [C], None),
    "cat_channels": (lambda a, b: torch.cat([a, b], 1), [(2, 3, 5, 6), (2, 2, 5, 6)], [C, C], None),
    "cat_batch_3d": (lambda a, b: torch.cat([a, b], 0), [(2, 3, 4, 5, 6), (1, 3, 4, 5, 6)], [C, C], None),
}

PARAMS = []
for name, (fn, shapes, fmts, dtypes) in CASES.items():
    for dtype in dtypes or (torch.float32,):
        for combo in itertools.product(*fmts):
            PARAMS.append(pytest.param(name, combo, dtype, id=f"{name}-{'_'.join(combo)}-{str(dtype)[6:]}"))

TOL = {torch.float32: dict(atol=2e-4, rtol=2e-4), torch.bfloat16: dict(atol=5e-2, rtol=5e-2)}


@pytest.mark.parametrize("name,combo,dtype", PARAMS)
def test_layout_and_values_match_cpu(name, combo, dtype):
    fn, shapes, _, _ = CASES[name]
    for grad_fmt in ("c", "cl"):
        out_cpu, grads_cpu = run(fn, shapes, combo, dtype, "cpu", grad_fmt)
        out, grads = run(fn, shapes, combo, dtype, "neuron", grad_fmt)
        assert out.device.type == "neuron"
        assert layout(out) == layout(out_cpu), f"output strides {out.stride()} vs CPU {out_cpu.stride()}"
        torch.testing.assert_close(out.cpu(), out_cpu, **TOL[dtype])
        for i, (g, g_cpu) in enumerate(zip(grads, grads_cpu)):
            torch.testing.assert_close(g.cpu(), g_cpu, **TOL[dtype])
            if name.startswith("group_norm") and i == 0:
                continue  # autograd hands non-CPU devices contiguous tensors: see the op test below
            assert layout(g) == layout(g_cpu), f"grad {i} strides {g.stride()} vs CPU {g_cpu.stride()}"


@pytest.mark.parametrize("kernel", [3, 1])
def test_channels_last_conv_is_laid_out_like_cpu(kernel):
    """Beyond the dims longer than 1: a channels-last conv's result and gradients have CPU's exact strides."""
    x = make((2, 3, 5, 6), "cl", torch.float32, "cpu", 0)
    w = make((4, 3, kernel, kernel), "c", torch.float32, "cpu", 1)
    results = {}
    for dev in ("cpu", "neuron"):
        xd, wd = x.to(dev).requires_grad_(), w.to(dev).requires_grad_()
        out = F.conv2d(xd, wd)
        results[dev] = (out, *torch.autograd.grad(out, (xd, wd), torch.ones_like(out)))
    for a, b in zip(results["neuron"], results["cpu"]):
        assert a.stride() == b.stride()


@pytest.mark.parametrize("shape,groups", [((2, 4, 5, 6), 2), ((2, 4, 3, 5, 6), 2), ((3, 6, 20, 16), 3)])
def test_group_norm_backward_op_keeps_input_layout(shape, groups):
    x = make(shape, "cl", torch.float32, "cpu", 0)
    g = make(shape, "cl", torch.float32, "cpu", 1)  # CPU's kernel reads grad_out in x's layout
    w = torch.linspace(0.5, 1.5, shape[1])
    hw = x[0, 0].numel()
    results = {}
    for dev in ("cpu", "neuron"):
        xd, wd = x.to(dev), w.to(dev)
        y, mean, rstd = torch.ops.aten.native_group_norm(xd, wd, None, shape[0], shape[1], hw, groups, 1e-5)
        grads = torch.ops.aten.native_group_norm_backward(g.to(dev), xd, mean, rstd, wd, shape[0], shape[1], hw, groups,
                                                          [True, True, True])
        results[dev] = (y, mean, rstd, *grads)
    for a, b in zip(results["neuron"], results["cpu"]):
        assert layout(a) == layout(b)
        torch.testing.assert_close(a.cpu(), b, atol=2e-4, rtol=2e-4)


def test_max_pool3d_rejects_a_channels_last_4d_input_as_cpu():
    x = make((3, 4, 5, 6), "cl", torch.float32, "cpu", 0)
    with pytest.raises(RuntimeError, match="Unsupported memory format"):
        F.max_pool3d(x, 2)
    with pytest.raises(RuntimeError, match="Unsupported memory format"):
        F.max_pool3d(x.to("neuron"), 2)


def test_pixel_shuffle_with_batch_dims_and_channels_last_3d_as_cpu():
    x = make((3, 2, 8, 2, 3), "c", torch.float32, "cpu", 0)
    torch.testing.assert_close(F.pixel_shuffle(x.to("neuron"), 2).cpu(), F.pixel_shuffle(x, 2), rtol=0, atol=0)
    torch.testing.assert_close(F.pixel_unshuffle(x.to("neuron"), 1).cpu(), F.pixel_unshuffle(x, 1), rtol=0, atol=0)
    x3d = x.contiguous(memory_format=torch.channels_last_3d)
    for t in (x3d, x3d.to("neuron")):
        with pytest.raises(RuntimeError, match="Unsupported memory format"):
            F.pixel_shuffle(t, 2)
