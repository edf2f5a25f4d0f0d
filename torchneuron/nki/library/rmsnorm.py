"""RMSNorm forward and backward in NKI over rows of a 2-D input [rows, hidden]: 128 rows a tile,
the last tile masked."""
from __future__ import annotations

from .. import isa as nisa
from .. import language as nl
from .._kernel import jit

TILE = 128


def row_tiles(rows: int) -> int:
    """The grid of rms_norm_fwd: one program per 128 rows."""
    return (rows + TILE - 1) // TILE


@jit
def rms_norm_fwd(x, weight, eps):
    """y = x * rsqrt(mean(x^2) + eps) * weight, and that rsqrt per row (for the backward); launch
    on a grid of row_tiles(rows) programs, each taking its 128 rows (or more tiles in turn)."""
    rows, hidden = x.shape
    y = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm, name="y")
    rstd = nl.ndarray((rows,), nl.float32, buffer=nl.shared_hbm, name="rstd")
    w = nl.load(weight.reshape((1, hidden)))
    programs = nl.num_programs(0)
    for step in nl.affine_range((row_tiles(rows) + programs - 1) // programs):
        i = step * programs + nl.program_id(0)
        ip, jf = nl.mgrid[0:TILE, 0:hidden]
        valid = i * TILE + ip < rows
        t = nl.load(x[i * TILE + ip, jf], mask=valid)
        squares = nl.ndarray((TILE, hidden), nl.float32, name="squares")
        sum_sq = nl.ndarray((TILE, 1), nl.float32, name="sum_sq")
        nisa.activation_reduce(squares, nl.square, t, reduce_op=nl.add, reduce_res=sum_sq)
        r = nl.rsqrt(nisa.tensor_scalar(sum_sq, nl.multiply, 1.0 / hidden, op1=nl.add, operand1=float(eps)))
        out = nl.ndarray((TILE, hidden), x.dtype, name="out")
        nisa.scalar_tensor_tensor(dst=out, data=t, op0=nl.multiply, operand0=r, op1=nl.multiply, operand1=w)
        nl.store(y[i * TILE + ip, jf], out, mask=valid)
        i_r = nl.arange(TILE)
        nl.store(rstd[i * TILE + i_r], r.reshape((TILE,)), mask=(i * TILE + i_r < rows))
    return y, rstd


@jit
def rms_norm_bwd(grad_y, x, weight, rstd):
    """dx = r * (w dy - x r^2 mean(w dy x)) and dw = sum over rows of dy x r."""
    rows, hidden = x.shape
    dx = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm, name="dx")
    dw = nl.ndarray((hidden,), weight.dtype, buffer=nl.shared_hbm, name="dw")
    w = nl.load(weight.reshape((1, hidden)))
    dw_acc = nl.zeros((1, hidden), nl.float32, name="dw_acc")
    ones = nl.full((TILE, 1), 1.0, nl.float32, name="ones")
    chunk = 512 if hidden % 512 == 0 else hidden if hidden <= 512 else 0
    for i in nl.affine_range((rows + TILE - 1) // TILE):
        ip, jf = nl.mgrid[0:TILE, 0:hidden]
        valid = i * TILE + ip < rows
        # Rows past the end are zeros, so that they add nothing to dw.
        t = nl.zeros((TILE, hidden), x.dtype, name="t")
        dy = nl.zeros((TILE, hidden), x.dtype, name="dy")
        r = nl.zeros((TILE, 1), nl.float32, name="r")
        nisa.dma_copy(t[ip, jf], x[i * TILE + ip, jf], mask=valid)
        nisa.dma_copy(dy[ip, jf], grad_y[i * TILE + ip, jf], mask=valid)
        i_r = nl.arange(TILE)[:, None]
        i_0 = nl.arange(1)[None, :]
        nisa.dma_copy(r[i_r, i_0], rstd.reshape((rows, 1))[i * TILE + i_r, i_0], mask=(i * TILE + i_r < rows))
        wdy = nl.multiply(dy, w, dtype=nl.float32)
        dot = nl.ndarray((TILE, 1), nl.float32, name="dot")
        products = nl.ndarray((TILE, hidden), nl.float32, name="products")
        nisa.tensor_tensor(products, wdy, t, nl.multiply)
        nisa.tensor_reduce(dot, nl.add, products, axis=1, keepdims=True)
        # coeff = r^3 * dot / hidden; dx = r * wdy - x * coeff
        coeff = nl.multiply(nl.multiply(nl.multiply(r, r), r), nl.multiply(dot, 1.0 / hidden))
        scaled = nisa.tensor_scalar(wdy, nl.multiply, r)
        correction = nisa.tensor_scalar(t, nl.multiply, coeff, dtype=nl.float32)
        out = nl.subtract(scaled, correction, dtype=x.dtype)
        nl.store(dx[i * TILE + ip, jf], out, mask=valid)
        # dw += ones^T @ (dy * x * r), a column sum through the matrix engine.
        contrib = nisa.tensor_scalar(nl.multiply(dy, t, dtype=nl.float32), nl.multiply, r)
        if chunk:
            for c in nl.affine_range(hidden // chunk):
                part = nl.ndarray((1, chunk), nl.float32, buffer=nl.psum, name="part")
                nisa.nc_matmul(part, ones, contrib[:, nl.ds(c * chunk, chunk)])
                nisa.tensor_tensor(dw_acc[:, nl.ds(c * chunk, chunk)], dw_acc[:, nl.ds(c * chunk, chunk)], part, nl.add)
        else:
            for c in nl.static_range((hidden + 511) // 512):
                width = min(512, hidden - c * 512)
                part = nl.ndarray((1, width), nl.float32, buffer=nl.psum, name="part")
                nisa.nc_matmul(part, ones, contrib[:, c * 512:c * 512 + width])
                nisa.tensor_tensor(dw_acc[:, c * 512:c * 512 + width], dw_acc[:, c * 512:c * 512 + width], part, nl.add)
    nl.store(dw.reshape((1, hidden)), nl.copy(dw_acc, dtype=weight.dtype))
    return dx, dw
