"""nki.collectives between ranks: a torchrun worker (distributed/nki_collectives.py) runs a kernel
calling all_gather, all_reduce, reduce_scatter, all_to_all and rank_id interpreted on the neuron
c10d backend (shared memory and Gloo transports), checked against NumPy on every rank."""
import pytest

from test_distributed import TRANSPORTS, run_ok


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_kernel_collectives_across_two_ranks(transport):
    run_ok("nki_collectives.py", 2, env=TRANSPORTS[transport], timeout=180)


def test_outside_a_process_group_a_collective_names_what_to_do():
    import numpy as np
    from torchneuron import nki
    import torchneuron.nki.collectives as ncc
    import torchneuron.nki.isa as nisa
    import torchneuron.nki.language as nl

    @nki.jit
    def kernel(x):
        t = nl.ndarray((2, 2), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        ncc.all_reduce([t], [t], ncc.ReplicaGroup([[0]]), nl.add)
        return x

    with pytest.raises(nki.NKIError, match="init_process_group"):
        nki.simulate_kernel(kernel, np.zeros((2, 2), np.float32))
    assert ncc.rank_id() == 0
