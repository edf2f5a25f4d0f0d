"""torch.mode(..., out=(values, indices)) on neuron: CPU's values, indices and checks."""

import pytest
import torch

import torchneuron  # noqa: F401


def sample(dtype):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 4, (5, 7, 3), generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int8, torch.uint8, torch.bool])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (-1, False)])
def test_mode_out_matches_cpu(dtype, dim, keepdim):
    x = sample(dtype)
    expected = torch.mode(x, dim, keepdim)
    values = torch.empty(0, dtype=dtype, device="neuron")
    indices = torch.empty(0, dtype=torch.long, device="neuron")
    result = torch.mode(x.to("neuron"), dim, keepdim, out=(values, indices))
    assert result.values is values and result.indices is indices
    assert values.shape == expected.values.shape
    torch.testing.assert_close(values.cpu(), expected.values, rtol=0, atol=0)
    torch.testing.assert_close(indices.cpu(), expected.indices, rtol=0, atol=0)


def test_mode_out_of_a_scalar():
    values = torch.empty(0, device="neuron")
    indices = torch.empty(0, dtype=torch.long, device="neuron")
    torch.mode(torch.tensor(5.0, device="neuron"), 0, False, out=(values, indices))
    assert values.dim() == 0 and values.item() == 5.0 and indices.item() == 0


@pytest.mark.parametrize(
    "values_dtype,indices_dtype,message",
    [
        (torch.float64, torch.long, "expected scalar type 'Float' but got 'Double' for values output"),
        (torch.float32, torch.int32, "expected scalar type 'Long' but got 'Int' for indices output"),
    ],
)
def test_mode_out_rejects_wrong_dtypes_as_cpu(values_dtype, indices_dtype, message):
    x = torch.ones(10)
    for device in ("cpu", "neuron"):
        values = torch.empty(10, dtype=values_dtype, device=device)
        indices = torch.empty(10, dtype=indices_dtype, device=device)
        with pytest.raises(RuntimeError, match=message):
            torch.mode(x.to(device), -1, True, out=(values, indices))
