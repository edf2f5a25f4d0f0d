"""Tests for the op-coverage table (torchneuron/ops.py): its placements are what a call does."""

import os

import pytest
import torch

import torchneuron
from torchneuron import ops

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "op-coverage.md")


@pytest.fixture
def fallback_counted():
    mode = torchneuron.fallback_mode()
    torchneuron.set_fallback_mode("silent")
    torchneuron.reset_fallback_report()
    yield
    torchneuron.set_fallback_mode(mode)
    torchneuron.reset_fallback_report()


# (op overload, a call that reaches it on neuron tensors)
CALLS = {
    "aten::add.Tensor": lambda x: x + x,
    "aten::exp.out": lambda x: torch.exp(x, out=torch.empty_like(x)),
    "aten::nextafter.out": lambda x: torch.nextafter(x, x + 1),
    "aten::gcd.out": lambda x: torch.gcd(x.long(), x.long()),
    "aten::igamma.out": lambda x: torch.igamma(x, x),
}


@pytest.mark.parametrize("op", sorted(CALLS))
def test_placement_is_what_a_call_does(op, fallback_counted):
    where = ops.placement(op)
    x = torch.rand(8, device="neuron") + 0.5
    CALLS[op](x)
    torch.neuron.synchronize()
    ran_on_cpu = op in torchneuron.fallback_report()
    assert where in ("native", "fallback"), where
    assert ran_on_cpu == (where == "fallback"), (op, where, torchneuron.fallback_report())


def test_every_registered_kernel_is_placed_on_the_device():
    # native_ops() names an op with its overload or, for the default overload, without.
    on_device = {op for op in torch._C._dispatch_get_all_op_names()
                 if ops.placement(op) in ("native", "view", "composite")}
    missing = sorted(set(torchneuron.native_ops()) - on_device)
    assert not missing, missing


def test_totals_count_each_op_once():
    table = ops.coverage()
    totals = ops.totals(table)
    rows = sum(len(family) for family in table.values())
    assert sum(n_ops for n_ops, _ in totals.values()) == rows
    assert sum(n for _, n in totals.values()) == sum(len(o) for f in table.values() for o in f.values())
    assert totals["native"][0] > 300


def test_docs_page_is_generated_from_the_registrations():
    """docs/op-coverage.md must be the tool's output, not a hand-kept copy."""
    with open(DOC, encoding="utf-8") as f:
        committed = f.read()
    assert committed == ops.markdown(ops.coverage()), (
        "docs/op-coverage.md is stale: run python -m torchneuron.ops --markdown docs/op-coverage.md")
