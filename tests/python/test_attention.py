"""scaled_dot_product_attention on neuron: the memory-efficient kernel (plain, causal, bool and
float masks with their gradient, ragged lengths, bf16) against CPU PyTorch, the math route
for dropout and grouped-query attention, and which route each case takes."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from test_nn_ops import assert_same


class OpsSeen(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.__name__)
        return func(*args, **(kwargs or {}))


def run_both(q, k, v, mask=None, **kwargs):
    results = []
    g = torch.Generator().manual_seed(9)
    grad = None
    for device in ("cpu", "neuron"):
        leaves = [t.to(device).detach().requires_grad_() for t in (q, k, v)]
        m = mask
        if mask is not None:
            m = mask.to(device).detach()
            if mask.is_floating_point():
                m.requires_grad_()
        out = F.scaled_dot_product_attention(*leaves, attn_mask=m, **kwargs)
        if grad is None:
            grad = torch.randn(out.shape, generator=g).to(out.dtype)
        out.backward(grad.to(device))
        grads = [t.grad for t in leaves] + ([m.grad] if mask is not None and mask.is_floating_point() else [])
        results.append((out.detach(), grads))
    return results


# The last has several key blocks of the online softmax, some wholly masked for causal rows.
SHAPES = [(2, 3, 5, 7, 8, 8), (1, 2, 130, 70, 16, 12), (2, 2, 64, 64, 32, 32), (1, 1, 300, 290, 8, 8)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("variant", ["plain", "causal", "bool mask", "float mask", "scale"])
def test_fused_attention_matches_cpu(shape, variant, no_fallback):
    B, H, L, S, E, Ev = shape
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(B, H, L, E, generator=g), torch.randn(B, H, S, E, generator=g), torch.randn(B, H, S, Ev, generator=g)
    mask, kwargs = None, {}
    if variant == "causal":
        kwargs["is_causal"] = True
    elif variant == "bool mask":
        mask = torch.rand(L, S, generator=g) > 0.3
        mask[:, 0] = True
    elif variant == "float mask":
        mask = torch.randn(B, 1, L, S, generator=g)
    elif variant == "scale":
        kwargs["scale"] = 0.3
    (cpu_out, cpu_grads), (out, grads) = run_both(q, k, v, mask, **kwargs)
    assert_same(out, cpu_out, tol=1e-5)
    for got, ref in zip(grads, cpu_grads):
        assert_same(got, ref, tol=1e-5)


def test_fused_attention_bfloat16(no_fallback):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 33, 16, generator=g).bfloat16() for _ in range(3))
    (cpu_out, cpu_grads), (out, grads) = run_both(q, k, v, is_causal=True)
    assert_same(out, cpu_out)
    for got, ref in zip(grads, cpu_grads):
        assert_same(got, ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["heads from projection", "rows strided", "expanded batch"])
def test_fused_attention_reads_and_writes_strided_heads(dtype, layout, no_fallback):
    """Per-head views of a [B, L, 3, H, E] projection (as attention layers make them) are read
    through their strides and the output and gradients come back in the query's layout; inputs
    whose rows are not contiguous are copied first."""
    B, L, H, E = 2, 37, 3, 8
    g = torch.Generator().manual_seed(4)
    qkv = torch.randn(B, L, 3, H, E, generator=g).to(dtype)
    grad = torch.randn(B, H, L, E, generator=g).to(dtype)
    results = []
    for device in ("cpu", "neuron"):
        leaf = qkv.to(device).detach().requires_grad_()
        if layout == "heads from projection":
            q, k, v = (t.squeeze(2).transpose(1, 2) for t in leaf.split(1, dim=2))
        elif layout == "rows strided":
            q, k, v = (t.squeeze(2).permute(0, 2, 3, 1).transpose(2, 3) for t in leaf.split(1, dim=2))
        else:
            q = leaf[:, :, 0].transpose(1, 2)
            k, v = (t[:1].expand(B, -1, -1, -1).transpose(1, 2) for t in (leaf[:, :, 1], leaf[:, :, 2]))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(grad.to(device))
        results.append((out.detach(), leaf.grad))
    (cpu_out, cpu_grad), (out, got_grad) = results
    assert_same(out, cpu_out)
    assert_same(got_grad, cpu_grad)
    assert out.stride() == cpu_out.stride()


def test_kernel_route_and_math_route():
    q = torch.randn(1, 2, 8, 4, device="neuron")
    with OpsSeen() as seen:
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert "_scaled_dot_product_fused_attention_overrideable.default" in seen.names
    kv = torch.randn(1, 1, 8, 4, device="neuron")  # grouped-query attention: the math route
    with OpsSeen() as seen:
        out = F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    assert "_scaled_dot_product_fused_attention_overrideable.default" not in seen.names
    ref = F.scaled_dot_product_attention(q.cpu(), kv.cpu(), kv.cpu(), enable_gqa=True)
    assert_same(out, ref)


def test_dropout_attention_runs_natively(no_fallback):
    q = torch.randn(2, 2, 16, 8, device="neuron")
    out = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert out.shape == q.shape and torch.isfinite(out).all()


def test_fully_masked_row_gives_zeros_like_cpu():
    q = torch.randn(1, 1, 3, 4)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False  # row 1 sees nothing
    assert_same(F.scaled_dot_product_attention(q.to("neuron"), q.to("neuron")[:, :, :1].expand(1, 1, 5, 4),
                                               q.to("neuron")[:, :, :1].expand(1, 1, 5, 4), attn_mask=mask.to("neuron")),
                F.scaled_dot_product_attention(q, q[:, :, :1].expand(1, 1, 5, 4), q[:, :, :1].expand(1, 1, 5, 4), attn_mask=mask))


def test_fused_attention_backward_takes_an_undefined_gradient():
    # gradcheck's undefined-gradient check (PyTorch's test_modules runs it on every module).
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True).double().to("neuron").eval()
    x = torch.randn(2, 3, 4, dtype=torch.float64, device="neuron", requires_grad=True)
    assert torch.autograd.gradcheck(layer, (x,), check_undefined_grad=True, fast_mode=True)
