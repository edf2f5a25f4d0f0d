"""Recurrent modules on neuron (nn.LSTM, nn.GRU, and their cells), whose fused cells CPU PyTorch
has no kernel for, against the same modules on CPU: outputs, final states and gradients."""

import copy

import pytest
import torch
from torch import nn

from test_nn_ops import assert_same


@pytest.mark.parametrize("cls,kwargs", [
    (nn.LSTM, dict(input_size=5, hidden_size=7, num_layers=2, batch_first=True)),
    (nn.LSTM, dict(input_size=5, hidden_size=4, bias=False, bidirectional=True)),
    (nn.GRU, dict(input_size=5, hidden_size=6, num_layers=2)),
    (nn.GRU, dict(input_size=5, hidden_size=3, bias=False, batch_first=True, bidirectional=True)),
])
def test_recurrent_module_matches_cpu(cls, kwargs, no_fallback):
    torch.manual_seed(0)
    module = cls(**kwargs)
    x = torch.randn(3, 6, 5)
    results = []
    for device in ("cpu", "neuron"):
        m = copy.deepcopy(module).to(device)
        inp = x.to(device).detach().requires_grad_()
        out, state = m(inp)
        states = state if isinstance(state, tuple) else (state,)
        (out.square().sum() + sum(s.sum() for s in states)).backward()
        results.append([out.detach(), *[s.detach() for s in states], inp.grad] + [p.grad for p in m.parameters()])
    for got, ref in zip(results[1], results[0]):
        assert_same(got, ref, tol=1e-5)


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell])
def test_cells_match_cpu(cls, no_fallback):
    torch.manual_seed(1)
    cell = cls(4, 6)
    x, h = torch.randn(2, 4), torch.randn(2, 6)
    results = []
    for device in ("cpu", "neuron"):
        c = copy.deepcopy(cell).to(device)
        state = (h.to(device), h.to(device) * 0.5) if cls is nn.LSTMCell else h.to(device)
        out = c(x.to(device), state)
        out = out[0] + out[1] if isinstance(out, tuple) else out
        out.sum().backward()
        results.append([out.detach()] + [p.grad for p in c.parameters()])
    for got, ref in zip(results[1], results[0]):
        assert_same(got, ref)
