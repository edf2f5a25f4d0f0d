"""The programs of an LNC2 grid advance together, instruction by instruction, as two cores do: a
program's early writes land before the other program's later ones even with no barrier between
them (AWS's MoE backward zeroes each core's share of a gradient, then both cores add into all of
it). Compiled (traced in lockstep, the kernel branching on its program id) and interpreted."""
import numpy as np
import pytest

from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run


@nki.jit
def k_zero_mine_then_write_theirs(x):
    n = x.shape[1]
    out = nl.ndarray((2, n), nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    other = 1 if pid == 0 else 0  # Python control flow on the program id
    zeros = nl.ndarray((1, n), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    nisa.dma_copy(dst=out[pid:pid + 1, :], src=zeros)  # each program clears its own row first
    t = nl.load(x[pid:pid + 1, :])
    y = nl.add(nl.multiply(t, 2.0), 1.0)
    nisa.dma_copy(dst=out[other:other + 1, :], src=y)  # later, it fills the other program's row
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_early_writes_land_before_the_other_programs_later_ones(mode):
    x = np.arange(2 * 8, dtype=np.float32).reshape(2, 8)
    got = np.asarray(run(k_zero_mine_then_write_theirs[2], mode, x))
    np.testing.assert_array_equal(got, (2 * x + 1)[::-1])
