"""Modules moved to neuron: tied parameters stay tied; 1-D, 2-D and 3-D convolutions, plain and
transposed, in float32 and half types (which reach backends as
convolution_overrideable) run natively and match CPU, and the cases without a native kernel
(float64) take the counted host route."""

import pytest
import torch
from torch import nn

import torchneuron


def test_tied_weights_stay_tied_across_moves():
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = nn.Sequential(emb, head).to("neuron")
    assert model[0].weight is model[1].weight
    assert len(list(model.parameters())) == 1
    model.to("cpu")
    assert model[0].weight is model[1].weight and model[0].weight.device.type == "cpu"


def test_parameter_identity_survives_to_device():
    layer = nn.Linear(3, 2)
    weight = layer.weight
    layer.to("neuron")
    assert layer.weight is weight and weight.device.type == "neuron"


def check_conv_against_cpu(conv, x):
    x.requires_grad_()
    conv(x).square().sum().backward()
    device_conv = type(conv)(**conv.init_args)
    device_conv.load_state_dict(conv.state_dict())
    device_conv.to("neuron")
    dx = x.detach().to("neuron").requires_grad_()
    device_conv(dx).square().sum().backward()
    torch.testing.assert_close(dx.grad.cpu(), x.grad, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(device_conv.weight.grad.cpu(), conv.weight.grad, atol=1e-3, rtol=1e-5)
    if conv.bias is not None:
        torch.testing.assert_close(device_conv.bias.grad.cpu(), conv.bias.grad, atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("args", [
    dict(in_channels=3, out_channels=5, kernel_size=3, padding=1, stride=2),
    dict(in_channels=4, out_channels=6, kernel_size=(3, 2), padding=(2, 0), dilation=(2, 1), groups=2, bias=False),
    dict(in_channels=2, out_channels=2, kernel_size=1),
    # Stride 1: the input gradient is a convolution of grad_output with flipped filters (padding
    # dilation * (kernel - 1) - padding), unless that padding is negative (the last case).
    dict(in_channels=3, out_channels=4, kernel_size=5, padding=3, dilation=2),
    dict(in_channels=3, out_channels=4, kernel_size=1, padding=1),
])
def test_conv2d_forward_backward_native(args):
    torch.manual_seed(0)
    conv = nn.Conv2d(**args)
    conv.init_args = args
    torchneuron.reset_fallback_report()
    check_conv_against_cpu(conv, torch.randn(2, args["in_channels"], 9, 8))
    assert torchneuron.fallback_report() == {}


def check_conv2d_against_float64_and_cpu(args, size, seed):
    """The float32 neuron forward within 2e-6 (relative to the largest output) of a float64 CPU
    reference, then forward and gradients against CPU PyTorch with no fallback."""
    torch.manual_seed(seed)
    conv = nn.Conv2d(**args)
    conv.init_args = args
    x = torch.randn(2, args["in_channels"], *size)
    expected = conv.double()(x.double())
    conv.float()
    got = type(conv)(**args)
    got.load_state_dict(conv.state_dict())
    got = got.to("neuron")(x.to("neuron")).detach().cpu().double()
    assert ((got - expected).abs().max() / expected.abs().max()).item() < 2e-6
    torchneuron.reset_fallback_report()
    check_conv_against_cpu(conv, x)
    assert torchneuron.fallback_report() == {}


@pytest.mark.parametrize("args,size", [
    (dict(in_channels=16, out_channels=32, kernel_size=3, padding=1), (32, 32)),
    (dict(in_channels=8, out_channels=8, kernel_size=3, padding=1, bias=False), (13, 9)),  # odd sizes: partial tiles
    (dict(in_channels=16, out_channels=24, kernel_size=3), (15, 12)),  # no padding
    (dict(in_channels=32, out_channels=32, kernel_size=3, padding=2, groups=2), (15, 17)),
    (dict(in_channels=64, out_channels=8, kernel_size=3, padding=1), (5, 30)),
], ids=["32x32", "odd", "unpadded", "groups", "wide"])
def test_conv2d_3x3_stride_1_matches_float64(args, size):
    # These shapes take the Winograd F(2x2, 3x3) forward (32 or more 2x2 output tiles); the
    # reference is float64 on the CPU.
    check_conv2d_against_float64_and_cpu(args, size, seed=0)


@pytest.mark.parametrize("args,size", [
    (dict(in_channels=8, out_channels=8, kernel_size=3, padding=1, groups=8), (20, 33)),
    (dict(in_channels=6, out_channels=6, kernel_size=7, padding=3, groups=6, bias=False), (14, 14)),  # ConvNeXt's
    (dict(in_channels=4, out_channels=4, kernel_size=(3, 5), padding=(2, 1), dilation=(2, 1), groups=4), (9, 17)),
    (dict(in_channels=5, out_channels=5, kernel_size=3, groups=5), (6, 40)),  # unpadded
    (dict(in_channels=4, out_channels=4, kernel_size=3, padding=1, stride=2, groups=4), (9, 12)),  # MobileNet's
    (dict(in_channels=3, out_channels=3, kernel_size=5, padding=2, stride=2, groups=3), (13, 11)),
    (dict(in_channels=3, out_channels=3, kernel_size=(3, 2), padding=(1, 0), stride=(2, 1), groups=3), (10, 9)),
    (dict(in_channels=2, out_channels=2, kernel_size=2, stride=3, groups=2), (11, 10)),  # inputs no tap reads
    (dict(in_channels=2, out_channels=2, kernel_size=3, padding=2, stride=2, dilation=2, groups=2), (12, 15)),
    (dict(in_channels=3, out_channels=3, kernel_size=3, padding=3, groups=3), (7, 8)),  # padding past the taps
], ids=["3x3", "7x7", "dilated", "unpadded", "strided", "strided-5x5", "strided-rows", "stride-3", "strided-dilated",
        "wide-padding"])
def test_depthwise_conv2d_matches_float64_and_cpu_gradients(args, size):
    # Depthwise convolutions take the direct kernels over stride phase planes (each output's
    # taps in the GEMM's order), forward and backward; the reference is float64 on the CPU, and
    # the gradients CPU PyTorch's.
    check_conv2d_against_float64_and_cpu(args, size, seed=1)


def test_conv1d_odd_output_width_matches_cpu():
    # 50 output columns: two vector strips and a zero-padded third in the tile multiply.
    torch.manual_seed(3)
    args = dict(in_channels=24, out_channels=40, kernel_size=3, padding=1)
    conv = nn.Conv1d(**args)
    conv.init_args = args
    check_conv_against_cpu(conv, torch.randn(3, 24, 50))


def test_conv_transpose_3x3_stride_1_matches_cpu():
    # Its input gradient is a forward 3x3 convolution, which takes the Winograd path.
    torch.manual_seed(2)
    args = dict(in_channels=16, out_channels=8, kernel_size=3, padding=1)
    conv = nn.ConvTranspose2d(**args)
    conv.init_args = args
    check_conv_against_cpu(conv, torch.randn(2, 16, 12, 14))


def test_conv1d_native():
    torch.manual_seed(0)
    args = dict(in_channels=4, out_channels=4, kernel_size=3, padding=2, dilation=2, groups=4)
    conv = nn.Conv1d(**args)
    conv.init_args = args
    torchneuron.reset_fallback_report()
    check_conv_against_cpu(conv, torch.randn(3, 4, 11))
    assert torchneuron.fallback_report() == {}


def test_conv_with_bad_channels_raises_like_cpu():
    conv = nn.Conv2d(3, 4, 3).to("neuron")
    with pytest.raises(RuntimeError, match="expected input.*to have 3 channels"):
        conv(torch.randn(1, 5, 8, 8, device="neuron"))
    conv3d = nn.Conv3d(3, 4, 3).to("neuron")
    with pytest.raises(RuntimeError, match=r"expected input\[1, 5, 4, 8, 8\] to have 3 channels"):
        conv3d(torch.randn(1, 5, 4, 8, 8, device="neuron"))


@pytest.mark.parametrize("cls,args,shape", [
    (nn.ConvTranspose1d, dict(in_channels=4, out_channels=2, kernel_size=3, stride=2, groups=2), (3, 4, 7)),
    (nn.ConvTranspose2d, dict(in_channels=3, out_channels=4, kernel_size=3, stride=2, padding=1, output_padding=1), (2, 3, 5, 6)),
    (nn.ConvTranspose2d, dict(in_channels=4, out_channels=6, kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1), groups=2), (2, 4, 4, 5)),
    # 3-D: sums over the kernel's depth of native 2-D convolutions (plain or transposed) of depth
    # slices; depth stride, padding and dilation, groups, trailing input depth that no tap reads.
    (nn.Conv3d, dict(in_channels=3, out_channels=4, kernel_size=3, padding=1), (2, 3, 5, 6, 7)),
    (nn.Conv3d, dict(in_channels=4, out_channels=6, kernel_size=(2, 3, 1), stride=(2, 1, 2), padding=(1, 0, 1),
                     dilation=(2, 1, 1), groups=2, bias=False), (2, 4, 8, 5, 6)),
    (nn.Conv3d, dict(in_channels=2, out_channels=3, kernel_size=1), (1, 2, 3, 4, 4)),
    (nn.ConvTranspose3d, dict(in_channels=3, out_channels=4, kernel_size=3, stride=2, padding=1, output_padding=1),
     (2, 3, 4, 5, 5)),
    (nn.ConvTranspose3d, dict(in_channels=4, out_channels=6, kernel_size=(2, 3, 2), stride=(3, 1, 2), padding=(1, 1, 0),
                              dilation=(2, 1, 1), groups=2), (1, 4, 3, 4, 5)),
])
def test_transposed_and_3d_conv_native(cls, args, shape):
    torch.manual_seed(1)
    conv = cls(**args)
    conv.init_args = args
    torchneuron.reset_fallback_report()
    check_conv_against_cpu(conv, torch.randn(*shape))
    assert torchneuron.fallback_report() == {}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_conv_computes_in_float(dtype):
    torch.manual_seed(2)
    x, w, b = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4)
    results = []
    for device in ("cpu", "neuron"):
        torchneuron.reset_fallback_report()
        leaves = [t.to(device, dtype).requires_grad_() for t in (x, w, b)]
        out = torch.nn.functional.conv2d(*leaves, padding=1)
        out.float().square().sum().backward()
        results.append([out.detach()] + [t.grad for t in leaves])
    assert torchneuron.fallback_report() == {}
    for got, ref in zip(results[1], results[0]):
        assert got.dtype == dtype
        # Gradients reach a few hundred, where one bfloat16 unit is 1 or 2, and CPU PyTorch's
        # own result differs between machines (on an AVX2-only AMD VM, the input gradient was
        # further than neuron's from a float64 reference).
        atol = max(0.1, 1e-2 * float(ref.float().abs().max()))
        torch.testing.assert_close(got.cpu().float(), ref.float(), atol=atol, rtol=2e-2)


def test_bfloat16_conv3d_native():
    torch.manual_seed(4)
    x, w, b = torch.randn(2, 3, 4, 6, 6), torch.randn(5, 3, 3, 3, 3), torch.randn(5)
    torchneuron.reset_fallback_report()
    got = torch.nn.functional.conv3d(*(t.to("neuron", torch.bfloat16) for t in (x, w, b)), padding=1).cpu()
    assert torchneuron.fallback_report() == {} and got.dtype == torch.bfloat16
    expected = torch.nn.functional.conv3d(*(t.bfloat16() for t in (x, w, b)), padding=1)
    torch.testing.assert_close(got.float(), expected.float(), atol=0.1, rtol=2e-2)


def test_float64_conv3d_is_native_and_an_integer_one_takes_the_counted_host_route():
    torch.manual_seed(1)
    conv = nn.Conv3d(2, 3, 2).double()
    x = torch.randn(1, 2, 4, 4, 4, dtype=torch.float64)
    expected = conv(x)
    conv.to("neuron")
    torchneuron.reset_fallback_report()
    torch.testing.assert_close(conv(x.to("neuron")).cpu(), expected)
    assert torchneuron.fallback_report() == {}
    xi, wi = torch.randint(-5, 5, (1, 2, 4, 4, 4)), torch.randint(-5, 5, (3, 2, 2, 2, 2))
    got = torch.nn.functional.conv3d(xi.to("neuron"), wi.to("neuron"))
    assert torch.equal(got.cpu(), torch.nn.functional.conv3d(xi, wi))
    assert torchneuron.fallback_report() == {"aten::convolution_overrideable": 1}
