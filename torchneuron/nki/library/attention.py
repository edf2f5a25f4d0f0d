"""Flash attention forward and backward in NKI: causal or not, grouped-query heads, head dims up to
128, sequences a multiple of 128. Layout [batch, heads, seq, head_dim], as SDPA takes it."""
from __future__ import annotations

import math

from .. import isa as nisa
from .. import language as nl
from .._kernel import jit

TILE = 128


def _load_transposed(dst_view, src_view):
    nisa.dma_transpose(dst_view, src_view)


@jit
def flash_attention_fwd(q, k, v, scale, causal):
    """o = softmax(q k^T * scale (+ causal mask)) v and lse = logsumexp per query row, per (b, h) program."""
    batch, heads, seq, dim = q.shape
    group = heads // k.shape[1]
    b, h = nl.program_id(0), nl.program_id(1)
    kv = h // group
    tiles = seq // TILE
    o = nl.ndarray(q.shape, q.dtype, buffer=nl.shared_hbm, name="o")
    lse = nl.ndarray((batch, heads, seq), nl.float32, buffer=nl.shared_hbm, name="lse")
    # The head's K^T [dim, seq] and V [128, tiles, dim] stay in SBUF for every query tile.
    k_t = nl.ndarray((dim, seq), q.dtype, buffer=nl.sbuf, name="k_t")
    v_all = nl.ndarray((TILE, tiles, dim), q.dtype, buffer=nl.sbuf, name="v_all")
    for t in nl.affine_range(tiles):
        _load_transposed(k_t[:, nl.ds(t * TILE, TILE)], k[b, kv, nl.ds(t * TILE, TILE), :])
        nisa.dma_copy(v_all[:, t, :], v[b, kv, nl.ds(t * TILE, TILE), :])
    for i in nl.affine_range(tiles):
        q_t = nl.ndarray((dim, TILE), q.dtype, buffer=nl.sbuf, name="q_t")
        _load_transposed(q_t, q[b, h, nl.ds(i * TILE, TILE), :])
        q_scaled = nl.multiply(q_t, scale, dtype=q.dtype)
        running_max = nl.full((TILE, 1), -3.0e38, nl.float32, name="running_max")
        running_sum = nl.zeros((TILE, 1), nl.float32, name="running_sum")
        acc = nl.zeros((TILE, dim), nl.float32, name="acc")
        for j in nl.affine_range(i + 1 if causal else tiles):
            scores_psum = nl.ndarray((TILE, TILE), nl.float32, buffer=nl.psum, name="scores_psum")
            nisa.nc_matmul(scores_psum, q_scaled, k_t[:, nl.ds(j * TILE, TILE)])
            scores = nl.ndarray((TILE, TILE), nl.float32, name="scores")
            if causal:
                ip, jf = nl.mgrid[0:TILE, 0:TILE]
                nisa.affine_select(scores, i * TILE + ip >= j * TILE + jf, scores_psum, -3.0e38)
            else:
                nisa.tensor_copy(scores, scores_psum)
            tile_max = nl.max(scores, axis=1, keepdims=True)
            new_max = nl.maximum(running_max, tile_max)
            neg_max = nl.multiply(new_max, -1.0)
            probs = nl.ndarray((TILE, TILE), q.dtype, name="probs")
            row_sum = nl.ndarray((TILE, 1), nl.float32, name="row_sum")
            nisa.activation(probs, nl.exp, scores, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum)
            correction = nl.exp(nl.subtract(running_max, new_max))
            nisa.tensor_tensor(running_sum, running_sum, correction, nl.multiply)
            nisa.tensor_tensor(running_sum, running_sum, row_sum, nl.add)
            probs_t = nisa.nc_transpose(probs)
            pv = nl.ndarray((TILE, dim), nl.float32, buffer=nl.psum, name="pv")
            nisa.nc_matmul(pv, probs_t, v_all[:, j, :])
            nisa.scalar_tensor_tensor(dst=acc, data=acc, op0=nl.multiply, operand0=correction, op1=nl.add, operand1=pv)
            nisa.tensor_copy(running_max, new_max)
        out = nl.ndarray((TILE, dim), q.dtype, name="out")
        nisa.tensor_scalar(out, acc, nl.divide, running_sum)
        nisa.dma_copy(o[b, h, nl.ds(i * TILE, TILE), :], out)
        row_lse = nl.add(running_max, nl.log(running_sum), dtype=nl.float32)
        nisa.dma_copy(lse[b, h, nl.ds(i * TILE, TILE)], row_lse.reshape((TILE,)))
    return o, lse


@jit
def flash_attention_bwd(q, k, v, o, grad_o, lse, scale, causal):
    """dq, dk, dv of flash attention, per (b, kv head) program: the group's query heads in turn."""
    batch, heads, seq, dim = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    b, kv = nl.program_id(0), nl.program_id(1)
    tiles = seq // TILE
    dq = nl.ndarray(q.shape, q.dtype, buffer=nl.shared_hbm, name="dq")
    dk = nl.ndarray(k.shape, k.dtype, buffer=nl.shared_hbm, name="dk")
    dv = nl.ndarray(v.shape, v.dtype, buffer=nl.shared_hbm, name="dv")
    k_all = nl.ndarray((TILE, tiles, dim), k.dtype, name="k_all")
    k_t = nl.ndarray((dim, seq), k.dtype, name="k_t")
    v_t = nl.ndarray((dim, seq), v.dtype, name="v_t")
    for t in nl.affine_range(tiles):
        nisa.dma_copy(k_all[:, t, :], k[b, kv, nl.ds(t * TILE, TILE), :])
        _load_transposed(k_t[:, nl.ds(t * TILE, TILE)], k[b, kv, nl.ds(t * TILE, TILE), :])
        _load_transposed(v_t[:, nl.ds(t * TILE, TILE)], v[b, kv, nl.ds(t * TILE, TILE), :])
    dk_acc = nl.zeros((TILE, tiles, dim), nl.float32, name="dk_acc")
    dv_acc = nl.zeros((TILE, tiles, dim), nl.float32, name="dv_acc")
    for g in nl.affine_range(group):
        h = kv * group + g
        q_all = nl.ndarray((TILE, tiles, dim), q.dtype, name="q_all")
        q_t = nl.ndarray((dim, seq), q.dtype, name="q_t")
        do_all = nl.ndarray((TILE, tiles, dim), q.dtype, name="do_all")
        do_t = nl.ndarray((dim, seq), q.dtype, name="do_t")
        lse_row = nl.ndarray((1, seq), nl.float32, name="lse_row")
        delta_row = nl.ndarray((1, seq), nl.float32, name="delta_row")
        nisa.dma_copy(lse_row, lse[b, h, :].reshape((1, seq)))
        for t in nl.affine_range(tiles):
            nisa.dma_copy(q_all[:, t, :], q[b, h, nl.ds(t * TILE, TILE), :])
            _load_transposed(q_t[:, nl.ds(t * TILE, TILE)], q[b, h, nl.ds(t * TILE, TILE), :])
            nisa.dma_copy(do_all[:, t, :], grad_o[b, h, nl.ds(t * TILE, TILE), :])
            _load_transposed(do_t[:, nl.ds(t * TILE, TILE)], grad_o[b, h, nl.ds(t * TILE, TILE), :])
            # delta = rowsum(dO * O), wanted as a row (along the free axis) for the transposed tiles.
            o_t = nl.ndarray((dim, TILE), q.dtype, name="o_t")
            _load_transposed(o_t, o[b, h, nl.ds(t * TILE, TILE), :])
            prod = nl.multiply(o_t, do_t[:, nl.ds(t * TILE, TILE)], dtype=nl.float32)
            ones = nl.full((dim, 1), 1.0, nl.float32, name="ones")
            delta_psum = nl.ndarray((1, TILE), nl.float32, buffer=nl.psum, name="delta_psum")
            nisa.nc_matmul(delta_psum, ones, prod)
            nisa.tensor_copy(delta_row[:, nl.ds(t * TILE, TILE)], delta_psum)
        dq_acc = nl.zeros((TILE, tiles, dim), nl.float32, name="dq_acc")
        for j in nl.affine_range(tiles):
            for step in nl.affine_range(tiles - j if causal else tiles):
                i = j + step if causal else step
                # S^T [k, q] = K Q^T; P^T = exp(S^T * scale - lse) (lse along the free axis).
                st_psum = nl.ndarray((TILE, TILE), nl.float32, buffer=nl.psum, name="st_psum")
                nisa.nc_matmul(st_psum, k_t[:, nl.ds(j * TILE, TILE)], q_t[:, nl.ds(i * TILE, TILE)])
                logits = nl.ndarray((TILE, TILE), nl.float32, name="logits")
                nisa.scalar_tensor_tensor(dst=logits, data=st_psum, op0=nl.multiply, operand0=scale, op1=nl.subtract,
                                          operand1=lse_row[:, nl.ds(i * TILE, TILE)])
                p_t = nl.ndarray((TILE, TILE), nl.float32, name="p_t")
                if causal:
                    masked = nl.ndarray((TILE, TILE), nl.float32, name="masked")
                    kp, qf = nl.mgrid[0:TILE, 0:TILE]
                    nisa.affine_select(masked, i * TILE + qf >= j * TILE + kp, logits, -3.0e38)
                    nisa.activation(p_t, nl.exp, masked)
                else:
                    nisa.activation(p_t, nl.exp, logits)
                p_t_low = nl.copy(p_t, dtype=q.dtype)
                p = nisa.nc_transpose(p_t_low)
                dv_psum = nl.ndarray((TILE, dim), nl.float32, buffer=nl.psum, name="dv_psum")
                nisa.nc_matmul(dv_psum, p, do_all[:, i, :])
                nisa.tensor_tensor(dv_acc[:, j, :], dv_acc[:, j, :], dv_psum, nl.add)
                # dP^T = V dO^T; dS^T = P^T * (dP^T - delta).
                dpt_psum = nl.ndarray((TILE, TILE), nl.float32, buffer=nl.psum, name="dpt_psum")
                nisa.nc_matmul(dpt_psum, v_t[:, nl.ds(j * TILE, TILE)], do_t[:, nl.ds(i * TILE, TILE)])
                ds_t = nl.ndarray((TILE, TILE), q.dtype, name="ds_t")
                nisa.scalar_tensor_tensor(dst=ds_t, data=dpt_psum, op0=nl.subtract,
                                          operand0=0.0, op1=nl.subtract, operand1=delta_row[:, nl.ds(i * TILE, TILE)])
                nisa.tensor_tensor(ds_t, ds_t, p_t, nl.multiply)
                ds = nisa.nc_transpose(ds_t)
                dk_psum = nl.ndarray((TILE, dim), nl.float32, buffer=nl.psum, name="dk_psum")
                nisa.nc_matmul(dk_psum, ds, q_all[:, i, :])
                nisa.scalar_tensor_tensor(dst=dk_acc[:, j, :], data=dk_psum, op0=nl.multiply, operand0=scale,
                                          op1=nl.add, operand1=dk_acc[:, j, :])
                dq_psum = nl.ndarray((TILE, dim), nl.float32, buffer=nl.psum, name="dq_psum")
                nisa.nc_matmul(dq_psum, ds_t, k_all[:, j, :])
                nisa.scalar_tensor_tensor(dst=dq_acc[:, i, :], data=dq_psum, op0=nl.multiply, operand0=scale,
                                          op1=nl.add, operand1=dq_acc[:, i, :])
        for t in nl.affine_range(tiles):
            out = nl.copy(dq_acc[:, t, :], dtype=q.dtype)
            nisa.dma_copy(dq[b, h, nl.ds(t * TILE, TILE), :], out)
    for t in nl.affine_range(tiles):
        nisa.dma_copy(dk[b, kv, nl.ds(t * TILE, TILE), :], nl.copy(dk_acc[:, t, :], dtype=k.dtype))
        nisa.dma_copy(dv[b, kv, nl.ds(t * TILE, TILE), :], nl.copy(dv_acc[:, t, :], dtype=v.dtype))
    return dq, dk, dv


def default_scale(dim: int) -> float:
    return 1.0 / math.sqrt(dim)
