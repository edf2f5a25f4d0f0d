"""Regression and binary losses on neuron against CPU PyTorch: mse, L1, smooth L1 (beta, 0),
Huber and binary cross entropy (weights, clamped logs), each reduction, gradients for input
and target."""

import pytest
import torch
import torch.nn.functional as F

from test_nn_ops import assert_same, sample

LOSSES = {
    "mse": F.mse_loss,
    "l1": F.l1_loss,
    "smooth_l1": lambda x, t, **kw: F.smooth_l1_loss(x, t, beta=0.5, **kw),
    "smooth_l1_beta0": lambda x, t, **kw: F.smooth_l1_loss(x, t, beta=0.0, **kw),
    "huber": lambda x, t, **kw: F.huber_loss(x, t, delta=0.7, **kw),
    "bce": lambda x, t, **kw: F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(t), **kw),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_and_gradients_match_cpu(name, reduction, no_fallback):
    x, t = sample((6, 5), seed=0) * 2, sample((6, 5), seed=1) * 2
    results = []
    for device in ("cpu", "neuron"):
        xs, ts = x.to(device).detach().requires_grad_(), t.to(device).detach().requires_grad_()
        loss = LOSSES[name](xs, ts, reduction=reduction)
        loss.backward(torch.ones_like(loss))
        results.append((loss.detach(), xs.grad, ts.grad))
    for got, ref in zip(results[1], results[0]):
        assert_same(got, ref)


def test_weighted_bce_and_clamped_log(no_fallback):
    x = torch.tensor([0.0, 1.0, 0.3, 0.9])
    t = torch.tensor([1.0, 0.0, 0.5, 1.0])
    w = torch.tensor([1.0, 2.0, 0.5, 3.0])
    assert_same(F.binary_cross_entropy(x.to("neuron"), t.to("neuron"), w.to("neuron")), F.binary_cross_entropy(x, t, w))
