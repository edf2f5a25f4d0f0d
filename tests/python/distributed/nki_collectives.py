"""torchrun worker: NKI kernels calling nki.collectives on the neuron backend, interpreted and
compiled (cut into device commands at each collective, run by the host in between), each result
checked against what the ranks' inputs give in NumPy."""

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


@nki.jit
def k_ring_in_a_loop(x):
    """acc = the sum of every rank's x in bfloat16, passed around the ring one step per iteration of
    an affine_range loop (a compiled kernel unrolls it to cut it at the collective): the tiles acc
    and cur carry over from one segment to the next."""
    world = ncc.ReplicaGroup([list(range(2))])
    cur = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=cur, src=x)
    acc = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for _ in nl.affine_range(2):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=cur, op=nl.add)
        nxt = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
        ncc.collective_permute_implicit(srcs_by_channel=[[cur]], dsts_by_channel=[[nxt]], replica_group=world)
        nisa.tensor_copy(dst=cur, src=nxt)
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def check_collectives(rank, xs, got, how):
    check = common.check
    check(f"{how} all_gather dim 1", lambda: np.testing.assert_array_equal(got[0, :8, :8], np.concatenate(xs, axis=1)))
    check(f"{how} all_gather dim 0", lambda: np.testing.assert_array_equal(got[1, :16, :4], np.concatenate(xs, axis=0)))
    check(f"{how} all_reduce add", lambda: np.testing.assert_array_equal(got[2, :8, :4], xs[0] + xs[1]))
    check(f"{how} all_reduce max", lambda: np.testing.assert_array_equal(got[3, :8, :4], np.maximum(xs[0], xs[1])))
    check(f"{how} reduce_scatter", lambda: np.testing.assert_array_equal(got[4, :4, :4],
                                                                         (xs[0] + xs[1])[4 * rank:4 * rank + 4]))
    check(f"{how} all_to_all", lambda: np.testing.assert_array_equal(
        got[5, :8, :4], np.concatenate([xs[0][4 * rank:4 * rank + 4], xs[1][4 * rank:4 * rank + 4]])))
    check(f"{how} rank_id", lambda: common.equal(float(got[0, 15, 7]), float(rank)))
    other = 1 - rank
    check(f"{how} collective_permute", lambda: np.testing.assert_array_equal(got[6, :8, :4], xs[other]))
    check(f"{how} ring permute", lambda: np.testing.assert_array_equal(got[7, :8, :4], xs[other]))
    check(f"{how} ring permute reduce", lambda: np.testing.assert_array_equal(got[8, :8, :4],
                                                                             xs[other] + xs[0] + xs[1]))
    check(f"{how} ring rank id", lambda: common.equal(float(got[8, 15, 7]), float(other)))


def main():
    rank, world, device = common.setup()
    xs = [np.arange(32, dtype=np.float32).reshape(8, 4) * (r + 1) - 5 * r for r in range(world)]
    x = torch.from_numpy(xs[rank]).to(device)
    check_collectives(rank, xs, np.asarray(torch.as_tensor(nki.simulate_kernel(k_collectives, x)).cpu()), "interpreted")
    check_collectives(rank, xs, k_collectives(x).cpu().numpy(), "compiled")
    common.check("compiled, cut at each of its 9 collectives", lambda: common.equal(
        len(next(iter(k_collectives._cache.values())).host_steps), 9))
    wide = [np.linspace(-3, 3, 128 * 6, dtype=np.float32).reshape(128, 6) * (r + 2) for r in range(world)]
    ring_sum = torch.from_numpy(wide[0]).bfloat16().float() + torch.from_numpy(wide[1]).bfloat16().float()
    for how, run in (("interpreted", nki.simulate_kernel), ("compiled", lambda k, a: k(a))):
        got = torch.as_tensor(run(k_ring_in_a_loop, torch.from_numpy(wide[rank]).to(device))).cpu()
        common.check(f"{how} ring in a loop", lambda: torch.testing.assert_close(got, ring_sum, rtol=0, atol=0))
    common.check("compiled, a grid of two programs refuses a collective", lambda: common.raises(
        lambda: k_ring_in_a_loop[2](torch.from_numpy(wide[rank]).to(device)), "run it interpreted"))
    common.report()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
