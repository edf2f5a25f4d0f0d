"""nki.isa.constants: the ISA's configuration enums. torchneuron accepts them wherever NKI does;
one software engine runs every instruction and every DMA, so they select nothing."""
from enum import Enum


class engine(Enum):
    """The engine an instruction runs on."""
    unknown = 0
    tensor = 1
    vector = 2
    scalar = 3
    gpsimd = 4
    activation = 3
    dma = 5
    sync = 6
    pool = 4


class dge_mode(Enum):
    """How a DMA's descriptors are generated."""
    unknown = 0
    none = 0
    swdge = 1
    hwdge = 2


class oob_mode(Enum):
    """What an indirect DMA does with an out-of-bounds index."""
    error = 0
    skip = 1


class dma_engine(Enum):
    """The DMA queue a transfer goes on."""
    unknown = 0
    sync = 1
    act = 2
    pool = 3
    gpsimd = 3
    dma = 4  # the shared DMA queues (the current API's default)
    gpsimd_dma = 5  # GpSimd's own DMA (SBUF-to-SBUF exchanges between the cores of an LNC2 launch)


class reduce_cmd(Enum):
    """The accumulate-register command of an activation with a reduction."""
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class matmul_perf_mode(Enum):
    """The Tensor Engine's performance mode (FP8 double row)."""
    none = 0
    double_row = 1
    double_row_gen3 = 1
    double_column = 2


class nc_version(Enum):
    """NeuronCore generations, ordered (kernels test `nisa.get_nc_version() >= nc_version.gen3`)."""
    gen2 = 2
    gen3 = 3
    gen4 = 4

    def __lt__(self, other):
        return self.value < other.value if isinstance(other, nc_version) else NotImplemented

    def __le__(self, other):
        return self.value <= other.value if isinstance(other, nc_version) else NotImplemented

    def __gt__(self, other):
        return self.value > other.value if isinstance(other, nc_version) else NotImplemented

    def __ge__(self, other):
        return self.value >= other.value if isinstance(other, nc_version) else NotImplemented


__all__ = ["engine", "dge_mode", "oob_mode", "dma_engine", "reduce_cmd", "matmul_perf_mode", "nc_version"]
