"""Fused Adam / AdamW on neuron against the same fused optimizers on CPU over several steps
(weight decay, amsgrad, maximize), the foreach default, bf16 parameters, and gradient
unscaling with a skipped step when found_inf is set."""

import copy

import pytest
import torch

from test_nn_ops import assert_same


def train(params, optimizer_factory, steps=6):
    optimizer = optimizer_factory(params)
    for step in range(steps):
        for k, p in enumerate(params):
            g = torch.Generator().manual_seed(100 * step + k)
            p.grad = torch.randn(p.shape, generator=g).to(p.device, p.dtype)
        optimizer.step()
    return params


@pytest.mark.parametrize("name,kwargs", [
    ("AdamW", dict(lr=1e-2, weight_decay=0.1)),
    ("AdamW", dict(lr=1e-2, amsgrad=True)),
    ("Adam", dict(lr=1e-2, weight_decay=0.05, maximize=True)),
    ("Adam", dict(lr=3e-3, betas=(0.8, 0.9))),
])
@pytest.mark.parametrize("fused", [True, False])
def test_adam_matches_cpu(name, kwargs, fused, no_fallback):
    torch.manual_seed(0)
    base = [torch.randn(5, 3), torch.randn(7), torch.randn(0), torch.randn(150, 131)]  # the last spans several tasks
    cls = getattr(torch.optim, name)
    # CPU reference with the same implementation choice.
    cpu = train([p.clone().requires_grad_() for p in base], lambda ps: cls(ps, fused=fused, foreach=None if fused else True, **kwargs))
    neuron = train([p.to("neuron").requires_grad_() for p in base], lambda ps: cls(ps, fused=fused, foreach=None if fused else True, **kwargs))
    for got, ref in zip(neuron, cpu):
        assert_same(got.detach(), ref.detach(), tol=1e-6)


def test_fused_adamw_bfloat16(no_fallback):
    torch.manual_seed(0)
    base = [torch.randn(16, 8).bfloat16()]
    cpu = train([p.clone().requires_grad_() for p in base], lambda ps: torch.optim.AdamW(ps, lr=1e-2, fused=True))
    neuron = train([p.to("neuron").requires_grad_() for p in base], lambda ps: torch.optim.AdamW(ps, lr=1e-2, fused=True))
    assert_same(neuron[0].detach(), cpu[0].detach())


def test_fused_adam_unscales_and_skips_on_inf(no_fallback):
    p = torch.randn(6, device="neuron")
    grad = torch.full((6,), 4.0, device="neuron")
    state = [torch.zeros(6, device="neuron") for _ in range(3)]
    step = torch.ones((), device="neuron")
    before = p.clone()
    args = ([p], [grad], [state[0]], [state[1]], [state[2]], [step])
    common = dict(lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    torch._fused_adamw_(*args, **common, grad_scale=torch.tensor(2.0, device="neuron"), found_inf=torch.tensor(1.0, device="neuron"))
    assert torch.equal(p.cpu(), before.cpu()) and torch.equal(grad.cpu(), torch.full((6,), 4.0))  # skipped entirely
    torch._fused_adamw_(*args, **common, grad_scale=torch.tensor(2.0, device="neuron"), found_inf=torch.tensor(0.0, device="neuron"))
    assert torch.equal(grad.cpu(), torch.full((6,), 2.0))  # unscaled in place
    assert_same(p, before.cpu() - 0.1)  # first Adam step moves each weight by lr
