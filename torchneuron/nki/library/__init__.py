"""torchneuron.nki.library: kernels written in NKI, shipped with torchneuron, each a custom op
(`torch.ops.torchneuron_nki.*`) that runs in eager, torch.compile and autograd code.

| function | op | autograd |
| --- | --- | --- |
| flash_attention(q, k, v, causal=False, scale=None) | flash_attention | yes (flash_attention_backward) |
| rms_norm(x, weight, eps=1e-6) | rms_norm | yes (rms_norm_backward) |
| rope(x, cos, sin) | rope | x only (cos and sin are constants) |
| cross_entropy(logits, target, ignore_index=-100, reduction="mean") | cross_entropy | logits |
| moe_router_topk(logits, k, normalize=True) | moe_router_topk | no |
| moe_blockwise_matmul(x, expert_weights, block_expert) | moe_blockwise_matmul | no |

Shapes: attention takes [batch, heads, seq, head_dim] with seq a multiple of 128, head_dim at
most 128 and heads a multiple of the key/value heads (grouped-query attention); use_nki_attention()
routes F.scaled_dot_product_attention there when those hold (and there is no mask or dropout).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..custom_op import nki_op
from .attention import flash_attention_bwd, flash_attention_fwd
from .cross_entropy import cross_entropy_bwd, cross_entropy_fwd
from .moe import moe_blockwise_matmul as _moe_blockwise_kernel
from .moe import moe_router_topk as _moe_topk_kernel
from .rmsnorm import rms_norm_bwd, rms_norm_fwd, row_tiles
from .rope import rope_fwd

# Flash attention ------------------------------------------------------------------------------


@nki_op("torchneuron_nki::flash_attention", mutates_args=())
def _flash_attention(q: Tensor, k: Tensor, v: Tensor, scale: float, causal: bool) -> tuple[Tensor, Tensor]:
    return flash_attention_fwd[q.shape[0], q.shape[1]](q.contiguous(), k.contiguous(), v.contiguous(), scale, causal)


@nki_op("torchneuron_nki::flash_attention_backward", mutates_args=())
def _flash_attention_backward(q: Tensor, k: Tensor, v: Tensor, o: Tensor, grad_o: Tensor, lse: Tensor, scale: float,
                              causal: bool) -> tuple[Tensor, Tensor, Tensor]:
    return flash_attention_bwd[q.shape[0], k.shape[1]](q.contiguous(), k.contiguous(), v.contiguous(), o.contiguous(),
                                                       grad_o.contiguous(), lse.contiguous(), scale, causal)


def _attention_setup(ctx, inputs, output):
    q, k, v, scale, causal = inputs
    ctx.save_for_backward(q, k, v, output[0], output[1])
    ctx.scale, ctx.causal = scale, causal


def _attention_backward(ctx, grad_o, _grad_lse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = _flash_attention_backward(q, k, v, o, grad_o, lse, ctx.scale, ctx.causal)
    return dq, dk, dv, None, None


_flash_attention.register_autograd(_attention_backward, setup_context=_attention_setup)


def attention_supported(q: Tensor, k: Tensor, v: Tensor) -> str | None:
    """Why flash_attention cannot take these inputs, or None when it can."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "query, key and value must be 4-D [batch, heads, seq, head_dim]"
    if q.dtype != k.dtype or q.dtype != v.dtype or q.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return "query, key and value must share a float dtype"
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2] or q.shape[3] != k.shape[3]:
        return f"shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)} are not self-attention over one sequence"
    if q.shape[2] % 128 or q.shape[2] == 0:
        return f"the sequence length {q.shape[2]} is not a multiple of 128"
    if q.shape[3] > 128:
        return f"head_dim {q.shape[3]} exceeds 128"
    if q.shape[1] % k.shape[1]:
        return f"{q.shape[1]} query heads are not a multiple of {k.shape[1]} key/value heads"
    return None


def flash_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float | None = None) -> Tensor:
    """softmax(q k^T * scale) v by the NKI flash attention kernel (scale defaults to 1/sqrt(head_dim))."""
    reason = attention_supported(q, k, v)
    if reason is not None:
        raise ValueError(f"torchneuron.nki.library.flash_attention: {reason}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return torch.ops.torchneuron_nki.flash_attention(q, k, v, scale, bool(causal))[0]


_original_sdpa = None


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if (query.device.type == "neuron" and attn_mask is None and dropout_p == 0.0
            and (enable_gqa or query.shape[-3] == key.shape[-3]) and attention_supported(query, key, value) is None):
        return flash_attention(query, key, value, is_causal, scale)
    return _original_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                          scale=scale, enable_gqa=enable_gqa)


def use_nki_attention(enabled: bool = True) -> None:
    """Routes F.scaled_dot_product_attention on neuron to flash_attention where it applies
    (TORCHNEURON_NKI_ATTENTION=1 does this at import); False restores PyTorch's."""
    global _original_sdpa
    functional = torch.nn.functional
    if enabled and _original_sdpa is None:
        _original_sdpa = functional.scaled_dot_product_attention
        functional.scaled_dot_product_attention = _sdpa
    elif not enabled and _original_sdpa is not None:
        functional.scaled_dot_product_attention = _original_sdpa
        _original_sdpa = None


def nki_attention_enabled() -> bool:
    """Whether use_nki_attention() routes SDPA to the NKI kernel."""
    return _original_sdpa is not None


# RMSNorm ----------------------------------------------------------------------------------------


@nki_op("torchneuron_nki::rms_norm", mutates_args=())
def _rms_norm(x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    y, rstd = rms_norm_fwd[row_tiles(rows.shape[0])](rows, weight.contiguous(), eps)
    return y.reshape(x.shape), rstd


@nki_op("torchneuron_nki::rms_norm_backward", mutates_args=())
def _rms_norm_backward(grad_y: Tensor, x: Tensor, weight: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor]:
    hidden = x.shape[-1]
    dx, dw = rms_norm_bwd(grad_y.reshape(-1, hidden).contiguous(), x.reshape(-1, hidden).contiguous(),
                          weight.contiguous(), rstd)
    return dx.reshape(x.shape), dw


def _rms_setup(ctx, inputs, output):
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])


def _rms_backward(ctx, grad_y, _grad_rstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dw = _rms_norm_backward(grad_y, x, weight, rstd)
    return dx, dw, None


_rms_norm.register_autograd(_rms_backward, setup_context=_rms_setup)


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """x * rsqrt(mean(x^2, -1) + eps) * weight by the NKI RMSNorm kernel."""
    if x.shape[-1] != weight.numel() or weight.dim() != 1:
        raise ValueError(f"torchneuron.nki.library.rms_norm: weight of shape {tuple(weight.shape)} for hidden size {x.shape[-1]}")
    return torch.ops.torchneuron_nki.rms_norm(x, weight, float(eps))[0]


# RoPE -------------------------------------------------------------------------------------------


@nki_op("torchneuron_nki::rope", mutates_args=())
def _rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return rope_fwd[x.shape[0], x.shape[1]](x.contiguous(), cos.contiguous(), sin.contiguous())


def _rope_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1], inputs[2])


def _rope_backward(ctx, grad):
    cos, sin = ctx.saved_tensors
    return _rope(grad, cos, -sin), None, None  # the rotation's inverse


_rope.register_autograd(_rope_backward, setup_context=_rope_setup)


def rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary embedding of x [batch, heads, seq, head_dim] with cos, sin [seq, head_dim / 2] (rotate-half form)."""
    if x.dim() != 4 or x.shape[-1] % 2 or tuple(cos.shape) != (x.shape[2], x.shape[3] // 2) or cos.shape != sin.shape:
        raise ValueError(f"torchneuron.nki.library.rope: x {tuple(x.shape)} needs cos and sin of shape "
                         f"[seq, head_dim / 2], got {tuple(cos.shape)} and {tuple(sin.shape)}")
    return torch.ops.torchneuron_nki.rope(x, cos, sin)


# Cross-entropy -----------------------------------------------------------------------------------


@nki_op("torchneuron_nki::cross_entropy", mutates_args=())
def _cross_entropy(logits: Tensor, target: Tensor, ignore_index: int) -> tuple[Tensor, Tensor]:
    return cross_entropy_fwd(logits.contiguous(), target.contiguous(), ignore_index)


@nki_op("torchneuron_nki::cross_entropy_backward", mutates_args=())
def _cross_entropy_backward(grad_loss: Tensor, logits: Tensor, target: Tensor, lse: Tensor, ignore_index: int) -> Tensor:
    return cross_entropy_bwd(grad_loss.contiguous(), logits.contiguous(), target.contiguous(), lse, ignore_index)


def _ce_setup(ctx, inputs, output):
    logits, target, ignore_index = inputs
    ctx.save_for_backward(logits, target, output[1])
    ctx.ignore_index = ignore_index


def _ce_backward(ctx, grad_loss, _grad_lse):
    logits, target, lse = ctx.saved_tensors
    return _cross_entropy_backward(grad_loss, logits, target, lse, ctx.ignore_index), None, None


_cross_entropy.register_autograd(_ce_backward, setup_context=_ce_setup)


def cross_entropy(logits: Tensor, target: Tensor, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """F.cross_entropy over logits [rows, vocab] and int64 targets [rows] by the NKI kernels."""
    if logits.dim() != 2 or target.shape != logits.shape[:1] or target.dtype != torch.int64:
        raise ValueError(f"torchneuron.nki.library.cross_entropy: logits [rows, vocab] and int64 target [rows], got "
                         f"{tuple(logits.shape)} and {tuple(target.shape)} {target.dtype}")
    loss = torch.ops.torchneuron_nki.cross_entropy(logits, target, int(ignore_index))[0]
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / (target != ignore_index).sum()
    raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


# MoE ----------------------------------------------------------------------------------------------


@nki_op("torchneuron_nki::moe_router_topk", mutates_args=())
def _moe_router_topk(logits: Tensor, k: int, normalize: bool) -> tuple[Tensor, Tensor]:
    return _moe_topk_kernel(logits.contiguous(), k, normalize)


@nki_op("torchneuron_nki::moe_blockwise_matmul", mutates_args=())
def _moe_blockwise_matmul(x: Tensor, expert_weights: Tensor, block_expert: Tensor) -> Tensor:
    return _moe_blockwise_kernel[block_expert.shape[0]](x.contiguous(), expert_weights.contiguous(), block_expert.contiguous())


def moe_router_topk(logits: Tensor, k: int, normalize: bool = True) -> tuple[Tensor, Tensor]:
    """(weights, expert indices as int32) of the top k of softmax(logits) per token; 8 <= experts <= 512, k <= 8."""
    if logits.dim() != 2 or not 8 <= logits.shape[1] <= 512 or not 1 <= k <= 8:
        raise ValueError(f"torchneuron.nki.library.moe_router_topk: logits [tokens, 8..512 experts] and 1 <= k <= 8, "
                         f"got {tuple(logits.shape)} and k={k}")
    return torch.ops.torchneuron_nki.moe_router_topk(logits, int(k), bool(normalize))


def moe_blockwise_matmul(x: Tensor, expert_weights: Tensor, block_expert: Tensor) -> Tensor:
    """Each block of 128 rows of x times the weights [hidden, ffn] of the expert block_expert (int32) names."""
    if x.dim() != 2 or x.shape[0] % 128 or expert_weights.dim() != 3 or expert_weights.shape[1] != x.shape[1] \
            or block_expert.shape != (x.shape[0] // 128,) or block_expert.dtype != torch.int32:
        raise ValueError("torchneuron.nki.library.moe_blockwise_matmul: x [blocks * 128, hidden], expert_weights "
                         f"[experts, hidden, ffn], block_expert int32 [blocks]; got {tuple(x.shape)}, "
                         f"{tuple(expert_weights.shape)}, {tuple(block_expert.shape)} {block_expert.dtype}")
    return torch.ops.torchneuron_nki.moe_blockwise_matmul(x, expert_weights, block_expert)


__all__ = ["flash_attention", "rms_norm", "rope", "cross_entropy", "moe_router_topk", "moe_blockwise_matmul",
           "use_nki_attention", "nki_attention_enabled", "attention_supported"]
