"""The hardware's rules an NKI kernel must keep, each refused with an error that names it."""
import pytest
import torch

from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron.nki import KernelTraceError, NKIError



def run(body, *tensors):
    kernel = nki.jit(body)
    return kernel(*[t.to("neuron") for t in tensors])


def test_partition_dim_over_128(nki_mode):
    def body(x):
        nl.ndarray((129, 4), nl.float32)
    with pytest.raises(NKIError, match="partition dimension 129 .* exceeds the 128 partitions"):
        run(body, torch.zeros(1))


def test_load_of_more_than_128_rows(nki_mode):
    def body(x):
        nl.load(x)
    with pytest.raises(NKIError, match="partition dimension 200"):
        run(body, torch.zeros(200, 4))


def test_psum_tile_over_2kib(nki_mode):
    def body(x):
        nl.ndarray((128, 513), nl.float32, buffer=nl.psum)
    with pytest.raises(NKIError, match="PSUM tile .* 2052 bytes per partition; a PSUM tile holds at most 2048"):
        run(body, torch.zeros(1))


@pytest.mark.parametrize("case,message", [
    ("stationary", "stationary free size 200 exceeds 128"),
    ("moving", "moving free size 600 exceeds 512"),
    ("contraction", "partition dimension 129 .* exceeds the 128 partitions"),
])
def test_matmul_sizes(nki_mode, case, message):
    def body(x):
        k, m, n = {"stationary": (64, 200, 64), "moving": (64, 64, 600), "contraction": (129, 64, 64)}[case]
        a = nl.ndarray((k, m), nl.float32)
        b = nl.ndarray((k, n), nl.float32)
        out = nl.ndarray((m, n), nl.float32, buffer=nl.psum) if m <= 128 and n <= 512 else None
        nisa.nc_matmul(out, a, b) if out is not None else nisa.nc_matmul(a, b)
    with pytest.raises(NKIError, match=message):
        run(body, torch.zeros(1))


def test_matmul_operands_in_sbuf_and_result_in_psum(nki_mode):
    def operands_in_psum(x):
        a = nl.zeros((64, 64), nl.float32, buffer=nl.psum)
        b = nl.zeros((64, 64), nl.float32)
        nisa.nc_matmul(a, b)

    def result_in_sbuf(x):
        a = nl.zeros((64, 64), nl.float32)
        out = nl.ndarray((64, 64), nl.float32)
        nisa.nc_matmul(out, a, a)
    with pytest.raises(NKIError, match="stationary operand .* is in psum; matmul operands must be in SBUF"):
        run(operands_in_psum, torch.zeros(1))
    with pytest.raises(NKIError, match="is in sbuf; matmul writes PSUM"):
        run(result_in_sbuf, torch.zeros(1))


def test_no_reduction_over_the_partition_axis(nki_mode):
    def body(x):
        nisa.tensor_reduce(nl.add, nl.load(x), axis=0)
    with pytest.raises(NKIError, match="cannot reduce along the partition axis"):
        run(body, torch.zeros(16, 8))

    def body_nl(x):
        nl.sum(nl.load(x), axis=0)
    with pytest.raises(NKIError, match="cannot reduce along the partition axis"):
        run(body_nl, torch.zeros(16, 8))


def test_sbuf_capacity(nki_mode):
    def body(x):
        tiles = [nl.ndarray((128, 16384), nl.float32) for _ in range(4)]  # 4 x 64 KiB per partition
        return tiles
    with pytest.raises(NKIError, match="SBUF capacity exceeded .* the core has 229376"):
        run(body, torch.zeros(1))


def test_psum_capacity(nki_mode):
    def body(x):
        banks = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(9)]  # 8 banks of 2 KiB
        return banks
    with pytest.raises(NKIError, match="PSUM capacity exceeded"):
        run(body, torch.zeros(1))


def test_outputs_in_shared_hbm(nki_mode):
    def on_chip(x):
        return nl.load(x)

    def private(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.private_hbm)
        nl.store(out, nl.load(x))
        return out
    with pytest.raises(NKIError, match="output .* is in sbuf; allocate outputs in device memory"):
        run(on_chip, torch.zeros(4, 4))
    with pytest.raises(NKIError, match="is in private_hbm"):
        run(private, torch.zeros(4, 4))


def test_out_of_bounds_names_tensor_dim_and_range(nki_mode):
    def slice_past_end(x):
        nl.load(x[0:8, 4:12])
    with pytest.raises(NKIError, match=r"out-of-bounds access on 'x' .* dim 1 indices 4\.\.11, but its size is 10"):
        run(slice_past_end, torch.zeros(8, 10))

    def loop_past_end(x):
        for i in nl.affine_range(3):
            nl.load(x[nl.ds(i * 64, 64), :])
    with pytest.raises(NKIError, match=r"'x' .* dim 0 indices (0|128)\.\.191, but its size is 150"):
        run(loop_past_end, torch.zeros(150, 4))

    def unmasked_arange(x):
        for i in nl.affine_range(2):
            ip, jf = nl.mgrid[0:128, 0:4]
            nl.load(x[i * 128 + ip, jf])
    with pytest.raises(NKIError, match=r"dim 0 indices (0|128)\.\.255, but its size is 200.*mask"):
        run(unmasked_arange, torch.zeros(200, 4))


def test_engines_read_on_chip_memory_only(nki_mode):
    def body(x):
        nl.exp(x)  # x is in HBM
    with pytest.raises(NKIError, match="'x' is in shared_hbm; compute engines read and write SBUF or PSUM only"):
        run(body, torch.zeros(4, 4))


def test_python_control_flow_on_a_program_id_traces_programs_in_lockstep(monkeypatch):
    monkeypatch.setenv("TORCHNEURON_NKI_INTERPRET", "0")

    def body(x):
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        pid = nl.program_id(0)
        t = nl.load(x[pid:pid + 1, :])
        if pid > 1:  # an integer in each program's trace (symbolic ids would make this Python control flow)
            t = nl.multiply(t, 10.0)
        nl.store(out[pid:pid + 1, :], t)
        return out
    kernel = nki.jit(body)[4]
    x = torch.arange(16.0).reshape(4, 4)
    expected = x.clone()
    expected[2:] *= 10
    assert torch.equal(kernel(x.to("neuron")).cpu(), expected)


def test_dynamic_index_out_of_range_is_a_device_fault():
    @nki.jit
    def gather_row(table, which):
        out = nl.ndarray((1, table.shape[1]), table.dtype, buffer=nl.shared_hbm)
        index = nl.load(which.reshape((1, 1)))
        nl.store(out, nl.load(table[index, :].reshape((1, table.shape[1]))))
        return out
    table = torch.arange(20.0).reshape(5, 4).to("neuron")
    assert torch.equal(gather_row(table, torch.tensor([3], dtype=torch.int32, device="neuron")).cpu(),
                       torch.arange(12.0, 16.0).reshape(1, 4))
    gather_row(table, torch.tensor([7], dtype=torch.int32, device="neuron"))
    with pytest.raises(torch.AcceleratorError, match="dynamic index read from a tile is out of range"):
        torch.neuron.synchronize()


def test_bad_arguments():
    @nki.jit
    def kernel(x):
        return x
    with pytest.raises(NKIError, match="take neuron tensors .* got a tensor on cpu"):
        kernel(torch.zeros(2))
    with pytest.raises(TypeError, match="missing a required argument"):
        kernel()
    with pytest.raises(NKIError, match="grid has 1 to 3 positive dims"):
        kernel[0](torch.zeros(2, device="neuron"))


def _freed_at_last_use(held_until_the_end):
    def body(x):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        tiles = []  # every tile stays referenced; 4 x 64 KiB per partition fit only if the dead ones are freed
        for k in range(4):
            t = nl.ndarray((128, 16384), nl.float32, buffer=nl.sbuf)
            nisa.memset(t, float(k))
            if not held_until_the_end:
                nl.store(out[:, k:k + 1], t[:, 0:1])  # its last use
            tiles.append(t)
        if held_until_the_end:
            for k, t in enumerate(tiles):  # used after the last allocation: all four live at once
                nl.store(out[:, k:k + 1], t[:, 0:1])
        return out
    return body


def test_capacity_frees_a_tile_at_its_last_use(nki_mode):
    out = run(_freed_at_last_use(False), torch.zeros(1)).cpu()
    torch.testing.assert_close(out, torch.arange(4.0).expand(128, 4))
    with pytest.raises(NKIError, match=r"SBUF capacity exceeded allocating 'tile\d+' .* take 262144 bytes"):
        run(_freed_at_last_use(True), torch.zeros(1))


def _used_in_a_loop(inside):
    def body(x):
        out = nl.ndarray((128, 2), nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((128, 20480), nl.float32, buffer=nl.sbuf)  # 80 KiB per partition
        nisa.memset(a, 1.0)
        nl.store(out[:, 0:1], a[:, 0:1])
        for i in nl.affine_range(2):
            if inside:
                nl.store(out[:, 0:1], a[:, 0:1])  # a lives through every iteration
            b = nl.ndarray((128, 40960), nl.float32, buffer=nl.sbuf)  # 160 KiB
            nisa.memset(b, 2.0)
            nl.store(out[:, 1:2], b[:, 0:1])
        return out
    return body


def test_capacity_a_tile_used_in_a_loop_lives_to_its_end(nki_mode):
    out = run(_used_in_a_loop(False), torch.zeros(1)).cpu()
    torch.testing.assert_close(out, torch.tensor([1.0, 2.0]).expand(128, 2))
    with pytest.raises(NKIError, match="SBUF capacity exceeded allocating .* take 245760 bytes"):
        run(_used_in_a_loop(True), torch.zeros(1))
