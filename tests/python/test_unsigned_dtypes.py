"""uint16 / uint32 / uint64 on neuron: what CPU PyTorch supports for them (random fills, the
factories PyTorch's test helpers build inputs with, the basic ops) works, and what it rejects is
rejected with its errors."""

import pytest
import torch
from torch.testing import make_tensor

UNSIGNED = [torch.uint16, torch.uint32, torch.uint64]
DEV = "neuron"


@pytest.mark.parametrize("dtype", UNSIGNED)
def test_randint_and_random_range(dtype):
    t = torch.randint(3, 10, (4096,), dtype=dtype, device=DEV).cpu()
    assert t.dtype == dtype
    as_int = t.to(torch.int64)
    assert int(as_int.min()) >= 3 and int(as_int.max()) <= 9
    assert len(torch.unique(as_int)) == 7  # every value of the range drawn
    r = torch.empty(4096, dtype=dtype, device=DEV).random_(5).cpu().to(torch.int64)
    assert int(r.min()) >= 0 and int(r.max()) <= 4


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32])
def test_random_range_upper_half(dtype):
    # Values above the signed type's maximum keep their unsigned meaning.
    hi = 65535 if dtype == torch.uint16 else 4294967295
    t = torch.empty(2048, dtype=dtype, device=DEV).random_(hi - 4, hi + 1).cpu().to(torch.int64)
    assert int(t.min()) >= hi - 4 and int(t.max()) == hi


@pytest.mark.parametrize("dtype", UNSIGNED)
def test_random_bounds_checked_as_cpu(dtype):
    for device in ("cpu", DEV):
        with pytest.raises(RuntimeError, match="from is out of bounds for"):
            torch.empty(4, dtype=dtype, device=device).random_(-1, 10)
    with pytest.raises(NotImplementedError):
        torch.empty(4, dtype=torch.uint16, device="cpu").random_()
    with pytest.raises(NotImplementedError):
        torch.empty(4, dtype=torch.uint16, device=DEV).random_()


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32])
def test_random_bounds_of_signed_and_byte_dtypes(dtype):
    hi = torch.iinfo(dtype).max
    for device in ("cpu", DEV):
        with pytest.raises(RuntimeError, match="to - 1 is out of bounds for"):
            torch.empty(4, dtype=dtype, device=device).random_(0, hi + 2)


@pytest.mark.parametrize("dtype", UNSIGNED)
def test_make_tensor_and_basic_ops_match_cpu(dtype):
    x = make_tensor((5, 7), dtype=dtype, device="cpu", low=0, high=50)
    y = make_tensor((5, 7), dtype=dtype, device="cpu", low=1, high=50)
    xn, yn = x.to(DEV), y.to(DEV)
    for fn in (lambda a, b: a * b, lambda a, b: a == b, lambda a, b: a & b, lambda a, b: a ^ b,
               lambda a, b: torch.cat([a, b]), lambda a, b: a.sum(1), lambda a, b: a.sort(1).values,
               lambda a, b: a.t().contiguous(), lambda a, b: a.to(torch.float32), lambda a, b: a.flatten().cumsum(0)):
        torch.testing.assert_close(fn(xn, yn).cpu(), fn(x, y))
    assert make_tensor((3,), dtype=dtype, device=DEV).dtype == dtype


@pytest.mark.parametrize("dtype", UNSIGNED)
def test_ops_cpu_lacks_raise_on_neuron_too(dtype):
    a = torch.ones(3, dtype=dtype)
    with pytest.raises(NotImplementedError):
        a + a
    with pytest.raises(NotImplementedError):
        a.to(DEV) + a.to(DEV)
