"""Every float64 path really computes in float64: inputs hold values float32 cannot represent
(1 + 2**-40 rounds to 1 in float32), and each result is compared with CPU PyTorch's float64 result
at a relative tolerance of 1e-10, which a float32 computation (relative error ~6e-8, or a
cancellation to 0) cannot meet. Each case also checks that the same op computed in float32 would
fail the comparison, so the case itself can tell the two apart."""

import pytest
import torch
import torch.nn.functional as F

TINY = 2.0 ** -40  # 1 + TINY is 1 in float32
RTOL = 1e-10


def near_integers(*shape, seed=0):
    """Small integers plus multiples of TINY: exact in float64, integers in float32."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(-3, 4, shape, generator=g).double()
    return base + TINY * torch.randint(1, 5, shape, generator=g).double()


X = near_integers(4, 6, seed=1) + 0.5  # away from 0, for log, sqrt, reciprocal
A, B = near_integers(3, 5, seed=2), near_integers(5, 4, seed=3)
CANCEL = torch.tensor([[1 + TINY, -1.0, 1.0, -1 - 3 * TINY], [3 + TINY, -3.0, -1 - TINY, 1.0]], dtype=torch.float64)



def minus_core(op, *inputs):
    """A case for an op whose float32 result would be exact: op(inputs) less op(the inputs rounded
    to float32), so only the TINY parts remain (and a float32 computation gives 0)."""
    core = op(*[t.float().double() for t in inputs])
    return (lambda *ts: op(*ts[:-1]) - ts[-1], *inputs, core)


CASES = {
    # elementwise
    "add": (lambda x: x + x.round(), X),
    "sub": (lambda x: x - x.round(), X),
    "mul": minus_core(lambda x: x * x, X),
    "div": (lambda x: x / 3, X),
    "exp": (torch.exp, X),
    "log": (lambda x: torch.log(x.abs()), X),
    "sqrt": (lambda x: torch.sqrt(x.abs()), X),
    "reciprocal": (torch.reciprocal, X),
    "tanh": (torch.tanh, X),
    "sigmoid": (torch.sigmoid, X),
    "pow": minus_core(lambda x: x.pow(3), X),
    "where": (lambda x: torch.where(x > 0, x, -x) - x.abs().round(), X),
    # reductions
    "sum": (lambda c: c.sum(1), CANCEL),
    "sum_all": (lambda c: c.sum(), CANCEL),
    "mean": (lambda c: c.mean(0), CANCEL),
    "prod": minus_core(lambda c: c.prod(1), CANCEL),
    "amax": minus_core(lambda c: c.amax(1), CANCEL),
    "argmax": (lambda c: c[:, 2:].argmax(1).double(), torch.tensor([[1.0, 1.0, 1.0, 1 + TINY]] * 2, dtype=torch.float64)),
    "var": (lambda c: c.var(1), CANCEL),
    "cumsum": (lambda c: c.cumsum(1), CANCEL),
    "norm": (lambda x: torch.linalg.vector_norm(x, dim=1), X),
    # matrix products
    "mm": minus_core(lambda a, b: a @ b, A, B),
    "addmm": (lambda a, b: torch.addmm(-(a.round() @ b.round()), a, b), A, B),
    "bmm": minus_core(lambda a, b: torch.bmm(a.expand(2, 3, 5), b.expand(2, 5, 4)), A, B),
    "linear": minus_core(lambda a, b: F.linear(a, b.t()), A, B),
    "mv": minus_core(lambda a, b: torch.mv(a, b[:, 0]), A, B),
    "dot": (lambda c: torch.dot(c[0], torch.ones(4, dtype=c.dtype, device=c.device)), CANCEL),
    # nn ops
    "softmax": (lambda x: torch.softmax(x, 1), X),
    "log_softmax": (lambda x: torch.log_softmax(x, 1), X),
    "layer_norm": (lambda x: F.layer_norm(x, (6,)), X),
    "cross_entropy": (lambda x: F.cross_entropy(x, torch.tensor([0, 1, 2, 5], device=x.device)), X),
    "mse_loss": minus_core(lambda x: F.mse_loss(x, x.round()), X),
    "gelu": (F.gelu, X),
}


def assert_float64_close(actual, expected, what):
    assert actual.dtype == torch.float64, f"{what}: {actual.dtype}"
    torch.testing.assert_close(actual, expected, rtol=RTOL, atol=0, msg=lambda m: f"{what} is not float64-exact:\n{m}")


@pytest.mark.parametrize("name", CASES)
def test_float64_op_is_computed_in_float64(name, no_fallback):
    op, *inputs = CASES[name]
    expected = op(*inputs)
    in_float32 = op(*[t.float() for t in inputs]).double()
    assert not torch.allclose(in_float32, expected, rtol=RTOL, atol=0), f"{name}: the case cannot tell float32 apart"
    got = op(*[t.to("neuron") for t in inputs]).cpu()
    assert_float64_close(got, expected, name)


@pytest.mark.parametrize("name", ["mul", "tanh", "softmax", "layer_norm", "mm", "sum"])
def test_float64_backward_is_computed_in_float64(name):
    op, *inputs = CASES[name]
    grads = []
    for device in ("cpu", "neuron"):
        leaves = [t.detach().to(device).requires_grad_() for t in inputs]
        out = op(*leaves)
        out.backward(torch.linspace(0.5, 1.5, out.numel(), dtype=torch.float64).reshape(out.shape).to(device))
        grads.append([leaf.grad.cpu() for leaf in leaves])
    for got, expected in zip(grads[1], grads[0]):
        assert_float64_close(got, expected, f"{name} backward")
