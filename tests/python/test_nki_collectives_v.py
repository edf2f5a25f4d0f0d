"""nki.collectives.all_gather_v and all_to_all_v between two ranks: a torchrun worker
(distributed/nki_collectives_v.py) runs them interpreted on the neuron c10d backend, checked
against NumPy on every rank."""
from test_distributed import run_ok


def test_variable_collectives_across_two_ranks():
    run_ok("nki_collectives_v.py", 2, timeout=180)
