"""Regression and binary losses on neuron against CPU PyTorch: mse, L1, smooth L1 (beta, 0),
Huber and binary cross entropy (weights, clamped logs), each reduction, gradients for input
and target; and the CTC loss (padded and concatenated targets, impossible alignments)."""

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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_smooth_l1_and_huber_boundaries_broadcast_and_dtypes(dtype, no_fallback):
    """The fused kernels at the quadratic / linear boundary (differences of exactly 0 and
    +-beta), with a broadcast target, in each floating dtype."""
    x = torch.tensor([[0.0, 0.5, -0.5, 1.25, -3.0], [0.7, -0.7, 0.2, 2.0, 0.0]], dtype=dtype)
    t = torch.zeros(1, 5, dtype=dtype)
    for fn in (lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction="none"),
               lambda a, b: F.huber_loss(a, b, delta=0.7, reduction="sum"),
               lambda a, b: F.smooth_l1_loss(a, b, beta=0.0)):
        results = []
        for device in ("cpu", "neuron"):
            leaf = x.detach().to(device).requires_grad_()
            out = fn(leaf, t.to(device))
            out.backward(torch.ones_like(out))
            results.append((out.detach(), leaf.grad))
        assert_same(results[1][0], results[0][0])
        assert_same(results[1][1], results[0][1])


def test_weighted_bce_and_clamped_log(no_fallback):
    x = torch.tensor([0.0, 1.0, 0.3, 0.9])
    t = torch.tensor([1.0, 0.0, 0.5, 1.0])
    w = torch.tensor([1.0, 2.0, 0.5, 3.0])
    assert_same(F.binary_cross_entropy(x.to("neuron"), t.to("neuron"), w.to("neuron")), F.binary_cross_entropy(x, t, w))


def ctc_case(dtype, seed=0, time=30, batch=4, classes=6, longest=8):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(time, batch, classes, generator=g, dtype=dtype)
    targets = torch.randint(1, classes, (batch, longest), generator=g)
    targets[0, :4] = 3  # repeated labels need a blank between them
    input_lengths = torch.tensor([time, time - 5, 17, 1])[:batch]  # the last: too short for its target
    target_lengths = torch.tensor([longest, 5, 0, 3])[:batch]
    return logits, targets, input_lengths, target_lengths


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("reduction, zero_infinity", [("mean", True), ("sum", True), ("none", False)])
@pytest.mark.parametrize("concatenated", [False, True], ids=["padded", "concatenated"])
def test_ctc_loss_and_gradient_match_cpu(dtype, reduction, zero_infinity, concatenated, no_fallback):
    logits, targets, input_lengths, target_lengths = ctc_case(dtype)
    if concatenated:
        targets = torch.cat([row[:n] for row, n in zip(targets, target_lengths)])
    results = []
    for device in ("cpu", "neuron"):
        leaf = logits.detach().to(device).requires_grad_()
        loss = F.ctc_loss(leaf.log_softmax(2), targets.to(device), input_lengths.to(device), target_lengths.to(device),
                          reduction=reduction, zero_infinity=zero_infinity)
        finite = loss if zero_infinity else torch.where(loss.isinf(), 0, loss)
        finite.sum().backward()
        results.append((loss.detach(), leaf.grad))
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    for dev, cpu in zip(results[1], results[0]):
        # Without zero_infinity the impossible sample's gradient is NaN on CPU too.
        torch.testing.assert_close(dev.cpu(), cpu, atol=tol, rtol=tol, equal_nan=not zero_infinity)
    if not zero_infinity:
        assert results[1][0][3].item() == float("inf")  # no alignment fits one step


def test_ctc_loss_rejects_bad_input():
    logits, targets, input_lengths, target_lengths = ctc_case(torch.float32)
    lp = logits.log_softmax(2).to("neuron")
    with pytest.raises(RuntimeError, match="log_probs tensor must not be empty"):
        F.ctc_loss(lp[:, :0], targets[:0].to("neuron"), [], [])
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(lp, targets.to("neuron"), input_lengths, target_lengths, blank=6)
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 30, but got value 31"):
        F.ctc_loss(lp, targets.to("neuron"), input_lengths + 1, target_lengths)
    # CPU PyTorch reads out of bounds for a label past the classes; neuron raises at the next sync.
    with pytest.raises(torch.AcceleratorError, match="target label 9 of sample 0 is out of range"):
        F.ctc_loss(lp, (targets * 0 + 9).to("neuron"), input_lengths, target_lengths).item()
