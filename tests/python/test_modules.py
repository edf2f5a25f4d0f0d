"""Modules moved to neuron: tied parameters stay tied, and convolution (which reaches backends
as convolution_overrideable) runs through the counted host route, matching CPU."""

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


def test_conv2d_forward_backward_match_cpu_and_are_counted():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 5, 3, padding=1, stride=2)
    x = torch.randn(2, 3, 9, 9, requires_grad=True)
    conv(x).square().sum().backward()

    device_conv = nn.Conv2d(3, 5, 3, padding=1, stride=2)
    device_conv.load_state_dict(conv.state_dict())
    device_conv.to("neuron")
    dx = x.detach().to("neuron").requires_grad_()
    torchneuron.reset_fallback_report()
    device_conv(dx).square().sum().backward()

    torch.testing.assert_close(dx.grad.cpu(), x.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(device_conv.weight.grad.cpu(), conv.weight.grad, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(device_conv.bias.grad.cpu(), conv.bias.grad, atol=1e-4, rtol=1e-5)
    report = torchneuron.fallback_report()
    assert report.get("aten::convolution_overrideable") == 1, report
    assert report.get("aten::convolution_backward_overrideable") == 1, report


def test_conv_transpose1d_matches_cpu():
    torch.manual_seed(1)
    conv = nn.ConvTranspose1d(4, 2, 3, stride=2, groups=2)
    x = torch.randn(3, 4, 7)
    expected = conv(x)
    conv.to("neuron")
    torch.testing.assert_close(conv(x.to("neuron")).cpu(), expected, atol=1e-5, rtol=1e-5)
