"""nki.collectives: collective communication between the ranks of a multi-device kernel. The
names exist (so kernels that use them on some paths import); a call raises NKIError naming it,
since torchneuron runs an NKI kernel on one device."""
from ._tensor import NKIError


class ReplicaGroup:
    """The ranks taking part in a collective."""

    def __init__(self, *groups, **_unused):
        self.groups = groups


def _unsupported(name):
    def function(*_args, **_kwargs):
        raise NKIError(f"nki.collectives.{name}: collectives between devices inside an NKI kernel are not supported "
                       "by torchneuron; use torch.distributed on the kernel's outputs")
    function.__name__ = name
    return function


for _name in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
              "collective_permute_implicit", "collective_permute_implicit_current_processing_rank_id", "rank_id",
              "send", "recv"):
    globals()[_name] = _unsupported(_name)

__all__ = ["ReplicaGroup", "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
           "collective_permute_implicit", "collective_permute_implicit_current_processing_rank_id", "rank_id",
           "send", "recv"]
