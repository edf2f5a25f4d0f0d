"""torch.autocast('neuron'): PyTorch's standard lower-precision / fp32 / promote lists (as on
CUDA), values against the same ops run in the autocast dtype on CPU, and bf16 training of the
tiny GPT lowering its loss with no CPU fallback."""

import os
import sys

import pytest
import torch
import torch.nn.functional as F

import torchneuron

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from tiny_gpt import TinyGPT, train_step  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_policies_and_values(dtype):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(8, 16, generator=g), torch.randn(16, 4, generator=g)
    da, db = a.to("neuron"), b.to("neuron")
    with torch.autocast("neuron", dtype=dtype):
        product = da @ db                      # lower precision
        soft = torch.softmax(product, dim=1)   # fp32
        linear = F.linear(da, db.t())          # lower precision
        promoted = torch.addcmul(soft, soft, product)  # promote to the widest input
    assert product.dtype == dtype and linear.dtype == dtype
    assert soft.dtype == torch.float32 and promoted.dtype == torch.float32
    expected = (a.to(dtype) @ b.to(dtype)).float()
    torch.testing.assert_close(product.cpu().float(), expected, atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(soft.cpu(), torch.softmax(product.cpu().float(), dim=1), atol=1e-6, rtol=1e-5)


def test_autocast_is_available_and_reports_dtypes():
    assert torch.amp.is_autocast_available("neuron")
    assert torch.neuron.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("neuron")
        assert torch.get_autocast_dtype("neuron") == torch.bfloat16


def test_bf16_autocast_training_lowers_the_loss():
    torch.manual_seed(0)
    model = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=2, dropout=0.0).to("neuron")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    tokens = torch.randint(0, 40, (8, 17), device="neuron")
    torchneuron.reset_fallback_report()
    losses = []
    for _ in range(30):
        with torch.autocast("neuron", dtype=torch.bfloat16):
            losses.append(train_step(model, optimizer, tokens).item())
    assert torchneuron.fallback_report() == {}
    assert losses[-1] < losses[0] - 0.5
    assert all(p.dtype == torch.float32 for p in model.parameters())
