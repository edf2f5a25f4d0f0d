"""Reductions given an empty dim list (issue 43), against CPU PyTorch: all / any reduce nothing
(the truth values, elementwise), while sum, mean, amax, var, norms and the others reduce every
dim; with keepdim, on 0-dim, empty, bool and integer inputs."""

import pytest
import torch

import torchneuron  # noqa: F401

# var / std over a single element (0-dim input, keepdim) warn on both devices, as they should.
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")

REDUCTIONS = {
    "all": lambda x, keepdim: torch.all(x, dim=[], keepdim=keepdim),
    "any": lambda x, keepdim: torch.any(x, dim=[], keepdim=keepdim),
    "all.out": lambda x, keepdim: torch.all(x, dim=[], keepdim=keepdim,
                                            out=torch.empty(0, dtype=torch.bool, device=x.device)),
    "any.out": lambda x, keepdim: torch.any(x, dim=[], keepdim=keepdim,
                                            out=torch.empty(0, dtype=torch.bool, device=x.device)),
    "sum": lambda x, keepdim: torch.sum(x, dim=[], keepdim=keepdim),
    "nansum": lambda x, keepdim: torch.nansum(x, dim=[], keepdim=keepdim),
    "mean": lambda x, keepdim: torch.mean(x.double(), dim=[], keepdim=keepdim),
    "nanmean": lambda x, keepdim: torch.nanmean(x.double(), dim=[], keepdim=keepdim),
    "amax": lambda x, keepdim: torch.amax(x, dim=[], keepdim=keepdim),
    "amin": lambda x, keepdim: torch.amin(x, dim=[], keepdim=keepdim),
    "var": lambda x, keepdim: torch.var(x.double(), dim=[], keepdim=keepdim),
    "std": lambda x, keepdim: torch.std(x.double(), dim=[], keepdim=keepdim),
    "var_mean": lambda x, keepdim: torch.var_mean(x.double(), dim=[], keepdim=keepdim),
    "std_mean": lambda x, keepdim: torch.std_mean(x.double(), dim=[], keepdim=keepdim),
    "norm": lambda x, keepdim: torch.norm(x.double(), dim=[], keepdim=keepdim),
    "vector_norm": lambda x, keepdim: torch.linalg.vector_norm(x.double(), 3, dim=[], keepdim=keepdim),
    "vector_norm_inf": lambda x, keepdim: torch.linalg.vector_norm(x.double(), float("inf"), dim=[], keepdim=keepdim),
    "logsumexp": lambda x, keepdim: torch.logsumexp(x.double(), dim=[], keepdim=keepdim),
    "count_nonzero": lambda x, keepdim: torch.count_nonzero(x, dim=[]),
    "sum.out": lambda x, keepdim: torch.sum(x.double(), dim=[], keepdim=keepdim,
                                            out=torch.empty(0, dtype=torch.float64, device=x.device)),
}

INPUTS = {
    "float": lambda: torch.tensor([[1.5, 0.0, -2.0], [3.0, 4.0, 0.0]]),
    "int": lambda: torch.tensor([[1, 0, -2], [3, 4, 0]]),
    "bool": lambda: torch.tensor([[True, False], [True, True]]),
    "0-dim": lambda: torch.tensor(2.5),
    "empty": lambda: torch.zeros(2, 0),
}


def outcome(function, x, keepdim):
    try:
        return function(x, keepdim)
    except Exception as e:  # noqa: BLE001  (an error must be the CPU's error too)
        return e


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("inputs", INPUTS, ids=str)
@pytest.mark.parametrize("name", REDUCTIONS, ids=str)
def test_empty_dim_list_matches_cpu(name, inputs, keepdim):
    x = INPUTS[inputs]()
    expected = outcome(REDUCTIONS[name], x, keepdim)
    actual = outcome(REDUCTIONS[name], x.to("neuron"), keepdim)
    if isinstance(expected, Exception):
        assert isinstance(actual, Exception), f"CPU raised {expected!r}, neuron returned {actual}"
        return
    assert not isinstance(actual, Exception), f"neuron raised {actual!r}"
    torch.testing.assert_close(torch.utils._pytree.tree_map(lambda t: t.cpu(), actual), expected, equal_nan=True)


def test_all_any_with_empty_dims_are_elementwise():
    """The case issue 43 found: all(x, dim=[]) is x != 0 elementwise, not one value."""
    x = torch.tensor([[1.0, 0.0, 2.0], [3.0, 4.0, 0.0]])
    result = torch.all(x.to("neuron"), dim=[])
    assert result.shape == (2, 3)
    assert torch.equal(result.cpu(), x != 0)
    assert torch.equal(torch.any(x.to("neuron"), dim=[]).cpu(), x != 0)
    assert torch.all(x.to("neuron"), dim=None).shape == ()  # None still reduces everything
