"""torchrun worker: NKI kernels calling nki.collectives (interpreted) on the neuron backend, each
result checked against what the ranks' inputs give in NumPy; a compiled kernel refuses them."""

import numpy as np
import torch

import common
import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.collectives as ncc
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def k_collectives(x):
    """x [8, 4] on each rank: all_gather along dims 1 and 0, all_reduce (add, max), reduce_scatter
    and all_to_all along dim 0, from SBUF tiles; rank_id in Python."""
    world = ncc.ReplicaGroup([list(range(2))])
    t = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    gathered = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
    ncc.all_gather(srcs=[t], dsts=[gathered], replica_group=world, collective_dim=1)
    rows = nl.ndarray((16, 4), nl.float32, buffer=nl.sbuf)
    ncc.all_gather(srcs=[t], dsts=[rows], replica_group=world, collective_dim=0)
    summed = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
    ncc.all_reduce(srcs=[t], dsts=[summed], replica_group=world, op=nl.add)
    largest = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
    ncc.all_reduce([t], [largest], world, nl.maximum)
    scattered = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
    ncc.reduce_scatter(srcs=[t], dsts=[scattered], replica_group=world, collective_dim=0, op=nl.add)
    exchanged = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
    ncc.all_to_all(srcs=[t], dsts=[exchanged], replica_group=world, collective_dim=0)
    swapped = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
    ncc.collective_permute(srcs=[t], dsts=[swapped], source_target_pairs=[[0, 1], [1, 0]])
    ring = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
    ncc.collective_permute_implicit(srcs_by_channel=[[t]], dsts_by_channel=[[ring]], replica_group=world)
    ring_sum = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
    ncc.collective_permute_implicit_reduce([[t]], [[summed]], [[ring_sum]], world, nl.add)
    previous = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=1, replica_group=world)
    out = nl.ndarray((9, 16, 8), nl.float32, buffer=nl.shared_hbm)
    zeros = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=float(ncc.rank_id()))  # every slot starts as the rank's number
    for k in range(9):
        nisa.dma_copy(dst=out[k], src=zeros)
    nisa.dma_copy(dst=out[0, 0:8, 0:8], src=gathered)
    nisa.dma_copy(dst=out[1, 0:16, 0:4], src=rows)
    nisa.dma_copy(dst=out[2, 0:8, 0:4], src=summed)
    nisa.dma_copy(dst=out[3, 0:8, 0:4], src=largest)
    nisa.dma_copy(dst=out[4, 0:4, 0:4], src=scattered)
    nisa.dma_copy(dst=out[5, 0:8, 0:4], src=exchanged)
    nisa.dma_copy(dst=out[6, 0:8, 0:4], src=swapped)
    nisa.dma_copy(dst=out[7, 0:8, 0:4], src=ring)
    nisa.dma_copy(dst=out[8, 0:8, 0:4], src=ring_sum)
    nisa.memset(dst=zeros[0:1, 0:1], value=float(previous))
    nisa.dma_copy(dst=out[8, 15:16, 7:8], src=zeros[0:1, 0:1])
    return out


def main():
    rank, world, device = common.setup()
    xs = [np.arange(32, dtype=np.float32).reshape(8, 4) * (r + 1) - 5 * r for r in range(world)]
    got = nki.simulate_kernel(k_collectives, torch.from_numpy(xs[rank]).to(device))
    got = np.asarray(torch.as_tensor(got).cpu())
    common.check("all_gather dim 1", lambda: np.testing.assert_array_equal(got[0, :8, :8], np.concatenate(xs, axis=1)))
    common.check("all_gather dim 0", lambda: np.testing.assert_array_equal(got[1, :16, :4], np.concatenate(xs, axis=0)))
    common.check("all_reduce add", lambda: np.testing.assert_array_equal(got[2, :8, :4], xs[0] + xs[1]))
    common.check("all_reduce max", lambda: np.testing.assert_array_equal(got[3, :8, :4], np.maximum(xs[0], xs[1])))
    common.check("reduce_scatter", lambda: np.testing.assert_array_equal(got[4, :4, :4],
                                                                          (xs[0] + xs[1])[4 * rank:4 * rank + 4]))
    common.check("all_to_all", lambda: np.testing.assert_array_equal(
        got[5, :8, :4], np.concatenate([xs[0][4 * rank:4 * rank + 4], xs[1][4 * rank:4 * rank + 4]])))
    common.check("rank_id", lambda: common.equal(float(got[0, 15, 7]), float(rank)))
    other = 1 - rank
    common.check("collective_permute", lambda: np.testing.assert_array_equal(got[6, :8, :4], xs[other]))
    common.check("ring permute", lambda: np.testing.assert_array_equal(got[7, :8, :4], xs[other]))
    common.check("ring permute reduce", lambda: np.testing.assert_array_equal(got[8, :8, :4],
                                                                               xs[other] + xs[0] + xs[1]))
    common.check("ring rank id", lambda: common.equal(float(got[8, 15, 7]), float(other)))
    common.check("compiled refuses", lambda: common.raises(
        lambda: k_collectives(torch.from_numpy(xs[rank]).to(device)), "TORCHNEURON_NKI_INTERPRET=1"))
    common.report()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
