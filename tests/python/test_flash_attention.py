"""aten::_flash_attention_forward / _backward on neuron (PyTorch has no CPU kernel for them):
torch.nn.attention.varlen.varlen_attn over packed sequences, and the dense [batch, seq, heads,
dim] form, against per-sequence SDPA on CPU, forward and gradients."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.varlen import varlen_attn


def reference(q, k, v, lengths, causal):
    """Per-sequence SDPA on CPU over packed [tokens, heads, dim] inputs."""
    outs, start = [], 0
    for n in lengths:
        qi, ki, vi = (t[start:start + n].transpose(0, 1) for t in (q, k, v))
        outs.append(F.scaled_dot_product_attention(qi, ki, vi, is_causal=causal, enable_gqa=True).transpose(0, 1))
        start += n
    return torch.cat(outs)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,kv_heads,dtype", [(4, 4, torch.float32), (4, 2, torch.float32), (2, 1, torch.bfloat16)])
def test_varlen_forward_and_backward(causal, heads, kv_heads, dtype):
    torch.manual_seed(0)
    lengths = [5, 17, 1, 9]
    total = sum(lengths)
    q = torch.randn(total, heads, 16, dtype=dtype, requires_grad=True)
    k = torch.randn(total, kv_heads, 16, dtype=dtype, requires_grad=True)
    v = torch.randn(total, kv_heads, 16, dtype=dtype, requires_grad=True)
    cu = torch.tensor([0, 5, 22, 23, 32], dtype=torch.int32)
    ref = reference(q, k, v, lengths, causal)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    nq, nk, nv = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    out = varlen_attn(nq, nk, nv, cu.to("neuron"), cu.to("neuron"), max(lengths), max(lengths),
                      window_size=(-1, 0) if causal else (-1, -1), enable_gqa=kv_heads != heads)
    out.backward(grad.to("neuron"))
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.cpu(), ref, **tol)
    for mine, theirs in ((nq, q), (nk, k), (nv, v)):
        torch.testing.assert_close(mine.grad.cpu(), theirs.grad, **tol)


def test_logsumexp_is_heads_by_tokens():
    torch.manual_seed(1)
    q = torch.randn(12, 2, 8)
    cu = torch.tensor([0, 4, 12], dtype=torch.int32, device="neuron")
    out, lse, *_ = torch.ops.aten._flash_attention_forward(q.to("neuron"), q.to("neuron"), q.to("neuron"), cu, cu, 8, 8,
                                                            0.0, False, False)
    assert lse.shape == (2, 12) and lse.dtype == torch.float32
    scores = torch.cat([torch.logsumexp(q[a:b].transpose(0, 1) @ q[a:b].transpose(0, 1).transpose(1, 2) / 8 ** 0.5, -1)
                        for a, b in ((0, 4), (4, 12))], dim=1)
    torch.testing.assert_close(lse.cpu(), scores, rtol=1e-5, atol=1e-5)


def test_dense_layout():
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 10, 3, 8, requires_grad=True) for _ in range(3))
    out, lse, *_ = torch.ops.aten._flash_attention_forward(*(t.detach().to("neuron") for t in (q, k, v)), None, None,
                                                            10, 10, 0.0, True, False)
    ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    torch.testing.assert_close(out.cpu(), ref.transpose(1, 2), rtol=1e-4, atol=1e-5)
    assert lse.shape == (2, 3, 10)


def test_unsupported_arguments_are_refused():
    q = torch.randn(8, 2, 8, device="neuron")
    cu = torch.tensor([0, 8], dtype=torch.int32, device="neuron")
    with pytest.raises(RuntimeError, match="does not apply dropout"):
        torch.ops.aten._flash_attention_forward(q, q, q, cu, cu, 8, 8, 0.1, False, False)
    with pytest.raises(RuntimeError, match="sliding windows"):
        torch.ops.aten._flash_attention_forward(q, q, q, cu, cu, 8, 8, 0.0, False, False, window_size_left=4,
                                                window_size_right=0)
    with pytest.raises(RuntimeError, match="int32 offsets"):
        torch.ops.aten._flash_attention_forward(q, q, q, cu.long(), cu.long(), 8, 8, 0.0, False, False)
