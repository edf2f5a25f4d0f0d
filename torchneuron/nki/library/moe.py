"""Mixture-of-experts pieces in NKI: the router's top-k (softmax over experts, then max8 /
find_index8) and a blockwise expert matmul, where each block of 128 tokens (sorted by expert)
multiplies the weights of the expert that a tensor of block ids names at run time."""
from __future__ import annotations

from .. import isa as nisa
from .. import language as nl
from .._kernel import jit

TILE = 128


@jit
def moe_router_topk(logits, k, normalize):
    """weights [tokens, k] (softmax probabilities of the top k experts, renormalised when asked)
    and their expert indices [tokens, k] (int32), for 8 <= experts <= 512 and k <= 8."""
    tokens, experts = logits.shape
    weights = nl.ndarray((tokens, k), nl.float32, buffer=nl.shared_hbm, name="weights")
    indices = nl.ndarray((tokens, k), nl.int32, buffer=nl.shared_hbm, name="indices")
    for i in nl.affine_range((tokens + TILE - 1) // TILE):
        ip, jf = nl.mgrid[0:TILE, 0:experts]
        valid = i * TILE + ip < tokens
        scores = nl.zeros((TILE, experts), nl.float32, name="scores")
        nisa.dma_copy(scores[ip, jf], logits[i * TILE + ip, jf], mask=valid)
        probs = nl.softmax(scores, axis=1, dtype=nl.float32)
        top = nisa.max8(probs)
        where = nisa.find_index8(probs, top)
        chosen = top[:, 0:k]
        if normalize:
            chosen = nl.divide(chosen, nl.sum(chosen, axis=1, keepdims=True))
        ik, kf = nl.mgrid[0:TILE, 0:k]
        nl.store(weights[i * TILE + ik, kf], chosen, mask=(i * TILE + ik < tokens))
        nl.store(indices[i * TILE + ik, kf], nl.copy(where[:, 0:k], dtype=nl.int32), mask=(i * TILE + ik < tokens))
    return weights, indices


@jit
def moe_blockwise_matmul(x, expert_weights, block_expert):
    """out[block] = x[block] @ expert_weights[block_expert[block]] for blocks of 128 rows; one
    program per block. x [blocks * 128, hidden], expert_weights [experts, hidden, ffn]."""
    rows, hidden = x.shape
    experts, _, ffn = expert_weights.shape
    block = nl.program_id(0)
    out = nl.ndarray((rows, ffn), x.dtype, buffer=nl.shared_hbm, name="out")
    expert = nl.ndarray((1, 1), nl.int32, name="expert")
    nisa.dma_copy(expert, block_expert.reshape((block_expert.shape[0], 1))[nl.ds(block, 1), :])
    k_tiles = (hidden + TILE - 1) // TILE
    x_t = nl.ndarray((TILE, k_tiles, TILE), x.dtype, name="x_t")  # [hidden chunk, chunk, token]
    for kt in nl.static_range(k_tiles):
        width = min(TILE, hidden - kt * TILE)
        nisa.dma_transpose(x_t[0:width, kt, :], x[nl.ds(block * TILE, TILE), kt * TILE:kt * TILE + width])
    n_chunk = 512 if ffn >= 512 else ffn
    for nt in nl.static_range((ffn + n_chunk - 1) // n_chunk):
        cols = min(n_chunk, ffn - nt * n_chunk)
        acc = nl.ndarray((TILE, cols), nl.float32, buffer=nl.psum, name="acc")
        for kt in nl.static_range(k_tiles):
            width = min(TILE, hidden - kt * TILE)
            w = nl.ndarray((width, cols), x.dtype, name="w")
            nisa.dma_copy(w, expert_weights[expert, kt * TILE:kt * TILE + width, nt * n_chunk:nt * n_chunk + cols])
            nisa.nc_matmul(acc, x_t[0:width, kt, :], w, accumulate=kt > 0)
        nisa.dma_copy(out[nl.ds(block * TILE, TILE), nt * n_chunk:nt * n_chunk + cols], nl.copy(acc, dtype=x.dtype))
    return out
