"""torchrun worker: nki.collectives.all_gather_v and all_to_all_v (interpreted) on the neuron backend:
variable counts and displacements from a metadata tensor, checked against NumPy on every rank."""

import numpy as np
import torch

import common
import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.collectives as ncc
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def k_variable(x, meta_gather, meta_a2a, meta_displs):
    """x [16] on each rank; all_gather_v, all_to_all_v (received counts written back) and
    all_to_all_v at given receive displacements, into dsts of 16 elements filled with -1."""
    world = ncc.ReplicaGroup([[0, 1]])
    out = nl.ndarray((3, 16), nl.float32, buffer=nl.shared_hbm)
    counts = nl.ndarray(meta_a2a.shape, meta_a2a.dtype, buffer=nl.shared_hbm)
    fill = nl.full((1, 16), -1.0, nl.float32, buffer=nl.sbuf)
    for k in range(3):
        nisa.dma_copy(dst=out[k:k + 1, :], src=fill)
    ncc.all_gather_v(srcs=[x], dsts=[out[0]], replica_group=world, metadata_tensor=meta_gather,
                     recv_counts_known=True)
    meta = nl.ndarray(meta_a2a.shape, meta_a2a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=meta, src=meta_a2a)
    ncc.all_to_all_v(srcs=[x], dsts=[out[1]], replica_group=world, metadata_tensor=meta)
    nisa.dma_copy(dst=counts, src=meta)
    ncc.all_to_all_v(srcs=[x], dsts=[out[2]], replica_group=world, metadata_tensor=meta_displs,
                     recv_counts_known=True, has_rdispls=True)
    return out, counts


def main():
    rank, world, device = common.setup()
    xs = [np.arange(16, dtype=np.float32) + 100 * r for r in range(world)]
    # all_gather_v: rank r sends r + 3 elements from element r
    gather = np.array([[rank + 3, 0], [rank, 0], [0, 0]], np.int32)
    # all_to_all_v: rank s sends (s + 1) * (d + 1) elements to rank d, from element 4 * d
    a2a = np.array([[(rank + 1) * (d + 1) for d in range(world)], [4 * d for d in range(world)], [0] * world], np.int32)
    # with receive displacements: each sender's 2 elements at 10 - 5 * s
    displs = np.array([[2] * world, [1] * world, [0] * world, [10 - 5 * s for s in range(world)]], np.int32)
    t = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    out, counts = nki.simulate_kernel(k_variable, t(xs[rank]), t(gather), t(a2a), t(displs))
    out, counts = np.asarray(torch.as_tensor(out).cpu()), np.asarray(torch.as_tensor(counts).cpu())

    def expected_gather():
        want = np.full(16, -1.0, np.float32)
        for s in range(world):
            want[8 * s:8 * s + s + 3] = xs[s][s:s + s + 3]
        return want

    def expected_a2a():
        want = np.full(16, -1.0, np.float32)
        for s in range(world):
            n = (s + 1) * (rank + 1)
            want[8 * s:8 * s + n] = xs[s][4 * rank:4 * rank + n]
        return want

    def expected_displs():
        want = np.full(16, -1.0, np.float32)
        for s in range(world):
            want[10 - 5 * s:12 - 5 * s] = xs[s][1:3]
        return want

    common.check("all_gather_v", lambda: np.testing.assert_array_equal(out[0], expected_gather()))
    common.check("all_to_all_v", lambda: np.testing.assert_array_equal(out[1], expected_a2a()))
    common.check("all_to_all_v counts", lambda: np.testing.assert_array_equal(
        counts[2], [(s + 1) * (rank + 1) for s in range(world)]))
    common.check("all_to_all_v displacements", lambda: np.testing.assert_array_equal(out[2], expected_displs()))
    common.report()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
