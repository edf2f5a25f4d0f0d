"""Cross-entropy forward and backward in NKI over logits [rows, vocab] and int64 targets [rows]:
128 rows a tile, the vocabulary in chunks of 512 with an online logsumexp; rows whose target is
ignore_index get loss 0 and gradient 0."""
from __future__ import annotations

from .. import isa as nisa
from .. import language as nl
from .._kernel import jit

TILE, CHUNK = 128, 512


def _targets(target, rows, i):
    """The tile's targets as floats [128, 1] (rows past the end: -1, which matches no column)."""
    ip = nl.arange(TILE)[:, None]
    i0 = nl.arange(1)[None, :]
    tgt = nl.full((TILE, 1), -1.0, nl.float32, name="tgt")
    nisa.dma_copy(tgt[ip, i0], target.reshape((rows, 1))[i * TILE + ip, i0], mask=(i * TILE + ip < rows))
    return tgt


@jit
def cross_entropy_fwd(logits, target, ignore_index):
    """Per-row loss = logsumexp(logits) - logits[target] (0 where target == ignore_index), and the logsumexp."""
    rows, vocab = logits.shape
    loss = nl.ndarray((rows,), nl.float32, buffer=nl.shared_hbm, name="loss")
    lse = nl.ndarray((rows,), nl.float32, buffer=nl.shared_hbm, name="lse")
    chunks = (vocab + CHUNK - 1) // CHUNK
    for i in nl.affine_range((rows + TILE - 1) // TILE):
        tgt = _targets(target, rows, i)
        running_max = nl.full((TILE, 1), -3.0e38, nl.float32, name="running_max")
        running_sum = nl.zeros((TILE, 1), nl.float32, name="running_sum")
        picked = nl.zeros((TILE, 1), nl.float32, name="picked")
        for c in nl.sequential_range(chunks):
            ip, jf = nl.mgrid[0:TILE, 0:CHUNK]
            inside = (c * CHUNK + jf < vocab) & (i * TILE + ip < rows)
            block = nl.full((TILE, CHUNK), -3.0e38, nl.float32, name="block")
            nisa.dma_copy(block[ip, jf], logits[i * TILE + ip, c * CHUNK + jf], mask=inside)
            new_max = nl.maximum(running_max, nl.max(block, axis=1, keepdims=True))
            sums = nl.ndarray((TILE, 1), nl.float32, name="sums")
            exps = nl.ndarray((TILE, CHUNK), nl.float32, name="exps")
            nisa.activation(exps, nl.exp, block, bias=nl.multiply(new_max, -1.0), reduce_op=nl.add, reduce_res=sums)
            correction = nl.exp(nl.subtract(running_max, new_max))
            nisa.scalar_tensor_tensor(dst=running_sum, data=running_sum, op0=nl.multiply, operand0=correction,
                                      op1=nl.add, operand1=sums)
            nisa.tensor_copy(running_max, new_max)
            # logits[target]: the column whose index equals the target.
            columns = nisa.iota(c * CHUNK + nl.arange(CHUNK)[None, :], dtype=nl.float32)
            hits = nl.ndarray((TILE, CHUNK), nl.float32, name="hits")
            nisa.tensor_scalar(hits, columns.broadcast_to((TILE, CHUNK)), nl.equal, tgt)
            chosen = nl.ndarray((TILE, 1), nl.float32, name="chosen")
            nisa.tensor_reduce(chosen, nl.add, nl.multiply(nl.where(hits, block, 0.0), 1.0), axis=1, keepdims=True)
            nisa.tensor_tensor(picked, picked, chosen, nl.add)
        row_lse = nl.add(running_max, nl.log(running_sum))
        keep = nl.not_equal(tgt, float(ignore_index), dtype=nl.float32)
        row_loss = nl.multiply(nl.subtract(row_lse, picked), keep)
        i_r = nl.arange(TILE)
        nl.store(loss[i * TILE + i_r], row_loss.reshape((TILE,)), mask=(i * TILE + i_r < rows))
        nl.store(lse[i * TILE + i_r], row_lse.reshape((TILE,)), mask=(i * TILE + i_r < rows))
    return loss, lse


@jit
def cross_entropy_bwd(grad_loss, logits, target, lse, ignore_index):
    """d logits = (softmax(logits) - onehot(target)) * grad_loss per row (0 for ignored rows)."""
    rows, vocab = logits.shape
    grad = nl.ndarray(logits.shape, logits.dtype, buffer=nl.shared_hbm, name="grad")
    chunks = (vocab + CHUNK - 1) // CHUNK
    for i in nl.affine_range((rows + TILE - 1) // TILE):
        tgt = _targets(target, rows, i)
        ip1 = nl.arange(TILE)[:, None]
        i0 = nl.arange(1)[None, :]
        row_lse = nl.zeros((TILE, 1), nl.float32, name="row_lse")
        scale = nl.zeros((TILE, 1), nl.float32, name="scale")
        nisa.dma_copy(row_lse[ip1, i0], lse.reshape((rows, 1))[i * TILE + ip1, i0], mask=(i * TILE + ip1 < rows))
        nisa.dma_copy(scale[ip1, i0], grad_loss.reshape((rows, 1))[i * TILE + ip1, i0], mask=(i * TILE + ip1 < rows))
        keep = nl.not_equal(tgt, float(ignore_index), dtype=nl.float32)
        row_scale = nl.multiply(scale, keep)
        for c in nl.affine_range(chunks):
            ip, jf = nl.mgrid[0:TILE, 0:CHUNK]
            inside = (c * CHUNK + jf < vocab) & (i * TILE + ip < rows)
            block = nl.zeros((TILE, CHUNK), nl.float32, name="block")
            nisa.dma_copy(block[ip, jf], logits[i * TILE + ip, c * CHUNK + jf], mask=inside)
            probs = nl.ndarray((TILE, CHUNK), nl.float32, name="probs")
            nisa.activation(probs, nl.exp, block, bias=nl.multiply(row_lse, -1.0))
            columns = nisa.iota(c * CHUNK + nl.arange(CHUNK)[None, :], dtype=nl.float32)
            hits = nl.ndarray((TILE, CHUNK), nl.float32, name="hits")
            nisa.tensor_scalar(hits, columns.broadcast_to((TILE, CHUNK)), nl.equal, tgt)
            out = nl.ndarray((TILE, CHUNK), logits.dtype, name="out")
            nisa.scalar_tensor_tensor(dst=out, data=hits, op0=nl.multiply, operand0=-1.0, op1=nl.add, operand1=probs)
            nisa.tensor_scalar(out, out, nl.multiply, row_scale)
            nisa.dma_copy(grad[i * TILE + ip, c * CHUNK + jf], out, mask=inside)
    return grad
