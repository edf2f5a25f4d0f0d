"""Matrix products whose operands have odd strides (issue 43), against CPU PyTorch in every dtype
the GEMM kernel takes: size-1 dimensions with stride 0 or another odd stride, stride-0 expanded
rows, columns and batches, two non-unit strides, outputs that are not row-major; and batched
gradients (gradcheck with check_batched_grad, whose vmap makes such operands) of Linear and of
small RNN, LSTM and GRU modules in float64."""

import pytest
import torch

import torchneuron  # noqa: F401

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64, torch.complex128, torch.int64]

# (a shape, a strides, b shape, b strides): the product a @ b with a and b views of larger storage.
MATRIX_CASES = [
    ((4, 1), (1, 0), (1, 3), (3, 1)),      # issue 43: a size-1 dimension with stride 0
    ((4, 1), (0, 0), (1, 3), (0, 5)),      # every row the same element; b's size-1 row stride 0
    ((4, 3), (0, 1), (3, 5), (1, 0)),      # rows of a expanded, columns of b expanded
    ((4, 3), (2, 9), (3, 5), (7, 2)),      # two non-unit strides each
    ((1, 3), (0, 2), (3, 5), (1, 3)),      # a single row with row stride 0; b column-major
    ((6, 4), (4, 1), (4, 1), (0, 7)),      # b a column, expanded
    ((6, 4), (1, 6), (4, 1), (1, 0)),      # a column-major, b a column with column stride 0
    ((1, 1), (0, 0), (1, 1), (5, 0)),      # 1 x 1 x 1
    ((64, 48), (1, 0), (48, 80), (0, 1)),  # large enough for the kernel to split it
]

# The same for batches: (a shape, a strides, b shape, b strides).
BATCH_CASES = [
    ((3, 4, 1), (0, 1, 0), (3, 1, 5), (5, 0, 1)),    # a's batch expanded, size-1 dims stride 0
    ((3, 4, 2), (8, 1, 4), (3, 2, 5), (0, 5, 1)),    # a column-major, b's batch expanded
    ((2, 1, 3), (3, 0, 1), (2, 3, 4), (12, 1, 3)),   # one row per entry, b column-major
    ((2, 5, 3), (0, 0, 1), (2, 3, 4), (1, 0, 0)),    # rows and batch expanded; b one value per row
    ((1, 4, 3), (0, 3, 1), (1, 3, 2), (99, 1, 3)),   # one entry with an odd batch stride
]


def integers(numel, dtype, seed):
    """Small integers (exact in every dtype, and their sums here too), complex for complex dtypes."""
    g = torch.Generator().manual_seed(seed)
    values = torch.randint(-2, 3, (numel,), generator=g).to(torch.float64)
    if dtype.is_complex:
        values = torch.complex(values, torch.randint(-2, 3, (numel,), generator=g).to(torch.float64))
    return values.to(dtype)


def strided(shape, strides, dtype, seed):
    """The same view (shape, strides, offset 1) of the same storage on the CPU and on neuron."""
    extent = 2 + sum((size - 1) * stride for size, stride in zip(shape, strides))
    storage = integers(extent + 3, dtype, seed)
    return storage.as_strided(shape, strides, 1), storage.to("neuron").as_strided(shape, strides, 1)


def check(actual, expected):
    assert actual.device.type == "neuron"
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", MATRIX_CASES, ids=lambda c: f"{c[0]}{c[1]}@{c[2]}{c[3]}")
def test_matrix_products_with_odd_strides(case, dtype, no_fallback):
    (a, da), (b, db) = strided(case[0], case[1], dtype, 1), strided(case[2], case[3], dtype, 2)
    m, n = a.shape[0], b.shape[1]
    check(torch.mm(da, db), torch.mm(a, b))
    check(da @ db, a @ b)
    bias, dbias = strided((m, n), (0, 1), dtype, 3)  # a bias broadcast over the rows
    check(torch.addmm(dbias, da, db, beta=2, alpha=-1), torch.addmm(bias, a, b, beta=2, alpha=-1))
    check(torch.nn.functional.linear(da, db.t(), dbias[0]), torch.nn.functional.linear(a, b.t(), bias[0]))
    # Into an output that is not row-major (a transposed view), and one whose size-1 dim has stride 0.
    out, dout = torch.zeros(n, m, dtype=dtype), torch.zeros(n, m, dtype=dtype, device="neuron")
    torch.mm(a, b, out=out.t())
    torch.mm(da, db, out=dout.t())
    check(dout, out)
    if n == 1:
        dcolumn = torch.zeros(m, dtype=dtype, device="neuron").as_strided((m, 1), (1, 0))
        check(torch.mm(da, db, out=dcolumn), torch.mm(a, b))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", BATCH_CASES, ids=lambda c: f"{c[0]}{c[1]}@{c[2]}{c[3]}")
def test_batched_products_with_odd_strides(case, dtype, no_fallback):
    (a, da), (b, db) = strided(case[0], case[1], dtype, 4), strided(case[2], case[3], dtype, 5)
    check(torch.bmm(da, db), torch.bmm(a, b))
    check(da @ db, a @ b)
    shape = (a.shape[0], a.shape[1], b.shape[2])
    c, dc = strided(shape, (0, 0, 1), dtype, 6)
    check(torch.baddbmm(dc, da, db, beta=-1, alpha=2), torch.baddbmm(c, a, b, beta=-1, alpha=2))
    # matmul of a batch with a single expanded matrix, and of a matrix with a batch.
    check(da @ db[0], a @ b[0])
    check(da[0] @ db, a[0] @ b)


def test_vector_products_with_stride_zero(no_fallback):
    """mv / dot / addmv with expanded vectors, float64."""
    (a, da) = strided((5, 4), (1, 5), torch.float64, 7)
    (v, dv) = strided((4,), (0,), torch.float64, 8)
    check(torch.mv(da, dv), torch.mv(a, v))
    check(torch.dot(dv, da[0]), torch.dot(v, a[0]))
    (s, ds) = strided((5,), (0,), torch.float64, 9)
    check(torch.addmv(ds, da, dv, beta=0.5), torch.addmv(s, a, v, beta=0.5))


def gradcheck(function, inputs):
    assert torch.autograd.gradcheck(function, inputs, check_batched_grad=True, fast_mode=False)


@pytest.mark.parametrize("reduce", [False, True], ids=["output", "sum"])
@pytest.mark.parametrize("shape,features", [((4, 3), 2), ((4, 3), 1), ((3,), 4)], ids=str)
def test_linear_batched_gradients(shape, features, reduce):
    """With .sum() the products' gradients are expanded (stride 0): (4, 1) and (1, 4) operands
    with strides (0, 0), and under vmap (2, 4) with strides (1, 0), reach mm."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(shape[-1], features, dtype=torch.float64).to("neuron")
    x = torch.randn(shape, dtype=torch.float64, device="neuron", requires_grad=True)

    def run(x, w, b):
        y = torch.nn.functional.linear(x, w, b)
        return y.sum() if reduce else y

    gradcheck(run, (x, linear.weight.detach().requires_grad_(), linear.bias.detach().requires_grad_()))


@pytest.mark.parametrize("module", [torch.nn.RNN, torch.nn.LSTM, torch.nn.GRU], ids=lambda m: m.__name__)
def test_recurrent_batched_gradients(module):
    torch.manual_seed(0)
    rnn = module(3, 2, dtype=torch.float64).to("neuron")
    x = torch.randn(3, 2, 3, dtype=torch.float64, device="neuron", requires_grad=True)

    def run(x):
        output, _ = rnn(x)
        return output

    gradcheck(run, (x,))
    gradcheck(lambda x: run(x).sum(), (x,))
    # And the same gradients as on the CPU.
    cpu = module(3, 2, dtype=torch.float64)
    cpu.load_state_dict({k: v.cpu() for k, v in rnn.state_dict().items()})
    x_cpu = x.detach().cpu().requires_grad_()
    cpu(x_cpu)[0].sum().backward()
    run(x).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), x_cpu.grad)


BAD_DGEMM = """
import ctypes
import torch
import torchneuron
from torchneuron import _cpu_dispatch
kernels = _cpu_dispatch._kernels  # the kernel library as torchneuron loaded it (dlopen'ed)
a, b, c = (ctypes.c_double * 16)(), (ctypes.c_double * 16)(), (ctypes.c_double * 16)()
RowMajor, NoTrans, Trans = 101, 111, 112
kernels.cblas_dgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_double, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                                     ctypes.c_int, ctypes.c_double, ctypes.c_void_p, ctypes.c_int]
# C[4x3] = A^T B with A stored [1 x 4] and lda 1 < 4: the call issue 43 saw.
kernels.cblas_dgemm(RowMajor, Trans, NoTrans, 4, 3, 1, 1.0, a, 1, b, 3, 0.0, c, 3)
print("returned")
"""


def test_blas_parameter_error_reaches_our_xerbla(run_python):
    """In the process as torchneuron sets it up (torch loaded, the kernel library dlopen'ed), a
    BLAS parameter error runs the kernel library's xerbla_, not OpenBLAS's: called from outside
    a kernel, as here, it reports the error on stderr in its own words and returns (inside a
    kernel it throws a KernelError, which kernel_tests' BlasErrors checks)."""
    result = run_python(BAD_DGEMM)
    assert "returned" in result.stdout, result.stderr
    assert "On entry to" not in result.stderr
    assert "BLAS/LAPACK routine DGEMM was called with an illegal value" in result.stderr, result.stderr
    assert "torchneuron's xerbla_" in result.stderr
