"""Rotary position embedding in NKI (the rotate-half form Llama uses): x [batch, heads, seq,
head_dim], cos and sin [seq, head_dim / 2]; out = [x1 cos - x2 sin, x2 cos + x1 sin]."""
from __future__ import annotations

from .. import isa as nisa
from .. import language as nl
from .._kernel import jit

TILE = 128


@jit
def rope_fwd(x, cos, sin):
    """One (batch, head) program: 128 positions a tile, the last masked. With -sin, the backward."""
    batch, heads, seq, dim = x.shape
    half = dim // 2
    b, h = nl.program_id(0), nl.program_id(1)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm, name="out")
    for s in nl.affine_range((seq + TILE - 1) // TILE):
        ip, jf = nl.mgrid[0:TILE, 0:dim]
        ip2, jh = nl.mgrid[0:TILE, 0:half]
        valid = s * TILE + ip < seq
        t = nl.load(x[b, h, s * TILE + ip, jf], mask=valid)
        c = nl.load(cos[s * TILE + ip2, jh], mask=(s * TILE + ip2 < seq))
        n = nl.load(sin[s * TILE + ip2, jh], mask=(s * TILE + ip2 < seq))
        x1, x2 = t[:, 0:half], t[:, half:dim]
        rotated = nl.ndarray((TILE, dim), x.dtype, name="rotated")
        first = nl.multiply(x1, c, dtype=nl.float32)
        nisa.scalar_tensor_tensor(dst=rotated[:, 0:half], data=nl.multiply(x2, n, dtype=nl.float32), op0=nl.multiply,
                                  operand0=-1.0, op1=nl.add, operand1=first)
        second = nl.multiply(x2, c, dtype=nl.float32)
        nisa.scalar_tensor_tensor(dst=rotated[:, half:dim], data=nl.multiply(x1, n, dtype=nl.float32), op0=nl.multiply,
                                  operand0=1.0, op1=nl.add, operand1=second)
        nl.store(out[b, h, s * TILE + ip, jf], rotated, mask=valid)
    return out
