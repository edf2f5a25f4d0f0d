"""torch.compile(backend="neuron"): kernels fused with matrix products: a linear layer's bias and
activation, and a softmax written out, as an mm's or bmm's epilogue; kernels that write a
product's first operand as its prologue; and the pass that moves a product's first reader up
to it."""

import copy
import math

import pytest
import torch
from torch import nn

import torchneuron
from tolerances import assert_close_to_scale

pytestmark = pytest.mark.usefixtures("fresh_compiler")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_linear_bias_and_activation_run_as_the_matmul_epilogue(dtype, no_fallback):
    """addmm splits into mm + bias add; the add (moved past the view a 3-D input needs) and the
    GELU after it run on each block of the product's rows in the mm's own device job. Forward
    and backward match CPU PyTorch, for 3-D and 2-D inputs."""
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(48, 160), nn.GELU(), nn.Linear(160, 48)).to(dtype)
    model = copy.deepcopy(reference).to("neuron")
    compiled = torch.compile(model, backend="neuron")
    for shape in [(6, 50, 48), (300, 48)]:
        with torch.no_grad():
            x = torch.randn(*shape, dtype=dtype)
            if dtype == torch.float32:
                torch.testing.assert_close(compiled(x.to("neuron")).cpu(), reference(x), atol=2e-5, rtol=1e-5)
            else:  # within 2e-2 of the output's largest value
                assert_close_to_scale(compiled(x.to("neuron")), reference(x))
    stats = torchneuron.compile_stats()
    assert stats["mm_epilogues"] == stats["kernels_generated"] == 2 * stats["graphs_compiled"]
    x = torch.randn(6, 50, 48, dtype=dtype, requires_grad=True)
    x_neuron = x.detach().to("neuron").requires_grad_()
    before = torchneuron.compile_stats()["mm_epilogues"]
    (compiled(x_neuron) ** 2).sum().backward()
    (reference(x) ** 2).sum().backward()
    # Forward: bias add and GELU, bias add. Backward: the GELU backward, which AOTAutograd puts
    # after the weight-gradient mm, moves up to the input-gradient mm it reads.
    assert torchneuron.compile_stats()["mm_epilogues"] - before == 3
    # bf16: the product is rounded before the bias add, so sums of rounded terms differ by a
    # few units of the gradient's largest element.
    for got, expected in [(x_neuron.grad, x.grad)] + [(p.grad, r.grad) for p, r in zip(model.parameters(),
                                                                                         reference.parameters())]:
        scale = float(expected.abs().max())
        atol, rtol = (1e-4, 1e-4) if dtype == torch.float32 else (1e-2 * scale, 2e-2)
        torch.testing.assert_close(got.cpu(), expected, atol=atol, rtol=rtol)


def test_attention_written_out_runs_its_softmax_as_the_batched_product_epilogue(no_fallback):
    """Scores from a batched product, scaled, masked and put through a softmax written out: the
    whole row kernel runs on each block of the bmm's rows in its device job. Forward and
    backward match CPU PyTorch."""
    def attention(q, k, v, mask):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]) + mask
        p = torch.exp(s - s.amax(-1, keepdim=True))
        return (p / p.sum(-1, keepdim=True)) @ v

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 48, 16, requires_grad=True) for _ in range(3))
    mask = torch.triu(torch.full((48, 48), float("-inf")), 1)
    on_device = [t.detach().to("neuron").requires_grad_() for t in (q, k, v)]
    compiled = torch.compile(attention, backend="neuron")
    with torch.no_grad():
        torch.testing.assert_close(compiled(*on_device, mask.to("neuron")).cpu(), attention(q, k, v, mask),
                                   atol=1e-5, rtol=1e-5)
    stats = torchneuron.compile_stats()
    assert stats["mm_epilogues"] == 1 and stats["kernels_generated"] == 1
    compiled(*on_device, mask.to("neuron")).pow(2).sum().backward()
    attention(q, k, v, mask).pow(2).sum().backward()
    for got, expected in zip(on_device, (q, k, v)):
        torch.testing.assert_close(got.grad.cpu(), expected.grad, atol=1e-5, rtol=1e-5)


class ScaledEmbeddingMLP(nn.Module):
    """Token and position embeddings, added and scaled (a kernel that no product computes), then
    Linear-Tanh-Linear."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(100, 64)
        self.position = nn.Parameter(torch.randn(32, 64))
        self.hidden = nn.Linear(64, 48)
        self.out = nn.Linear(48, 16)

    def forward(self, tokens):
        x = (self.embedding(tokens) + self.position) * 0.5
        return self.out(torch.tanh(self.hidden(x)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_kernel_writing_a_matmul_operand_runs_as_its_prologue(dtype, no_fallback):
    """The embedding add and scale run on each block of rows of the first Linear's input right
    before its mm reads them, in the mm's device job, next to that mm's bias-and-tanh epilogue.
    float32 splits the product by rows (block by block); bfloat16 runs the prologue over all
    rows first. Forward and backward match CPU PyTorch."""
    torch.manual_seed(0)
    reference = ScaledEmbeddingMLP().to(dtype)
    model = copy.deepcopy(reference).to("neuron")
    tokens = torch.randint(0, 100, (8, 32))
    got = torch.compile(model, backend="neuron")(tokens.to("neuron"))
    expected = reference(tokens)
    if dtype == torch.float32:
        torch.testing.assert_close(got.detach().cpu(), expected.detach(), atol=1e-5, rtol=1e-5)
    else:  # within 2e-2 of the output's largest value
        assert_close_to_scale(got.detach(), expected.detach())
    (got.float() ** 2).sum().backward()
    (expected.float() ** 2).sum().backward()
    stats = torchneuron.compile_stats()
    assert stats["mm_prologues"] == stats["prologue_launches"] == 1
    assert stats["epilogue_launches"] == stats["mm_epilogues"] >= 3
    for p, r in zip(model.parameters(), reference.parameters()):
        scale = float(r.grad.abs().max())
        atol, rtol = (1e-4, 1e-4) if dtype == torch.float32 else (2e-2 * scale, 2e-2)
        torch.testing.assert_close(p.grad.cpu(), r.grad, atol=atol, rtol=rtol)


def test_row_kernels_and_batched_products_take_prologues(no_fallback):
    """Prologues from row kernels, whose rows are the operand's (an RMS norm) or whose reduced
    output is the operand (a mean over the last dim), and into a bmm (scaled queries times
    keys): all run fused, and match CPU PyTorch."""
    def f(x, w, weight, z, pooled_weight, q, k):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
        pooled = torch.relu(z).mean(-1)
        return normed @ weight, pooled @ pooled_weight, (q * 0.25) @ k.transpose(-2, -1)

    torch.manual_seed(0)
    args = [torch.randn(512, 64), torch.randn(64), torch.randn(64, 96), torch.randn(24, 32, 16), torch.randn(32, 8),
            torch.randn(2, 3, 40, 16), torch.randn(2, 3, 40, 16)]
    with torch.no_grad():
        got = torch.compile(f, backend="neuron")(*[a.to("neuron") for a in args])
    for g, e in zip(got, f(*args)):
        torch.testing.assert_close(g.cpu(), e, atol=1e-4, rtol=1e-5)
    stats = torchneuron.compile_stats()
    assert stats["mm_prologues"] == stats["prologue_launches"] == 3


def test_prologue_whose_kernel_writes_the_other_operand_too_runs_apart(no_fallback):
    """y @ y.T with y from a kernel: the product reads all of y for every block of rows, so the
    run time launches the kernel on its own first; the result matches CPU PyTorch."""
    def f(x):
        y = torch.tanh(x) * 2
        return y @ y.t()

    x = torch.randn(300, 64)
    torch.testing.assert_close(torch.compile(f, backend="neuron")(x.to("neuron")).cpu(), f(x), atol=1e-4, rtol=1e-5)
    stats = torchneuron.compile_stats()
    assert stats["mm_prologues"] == 1 and stats["prologue_launches"] == 0


def test_kernel_reading_a_product_moves_up_to_it_only_when_its_inputs_allow():
    """The hoisting pass on a backward-shaped step list: mm (input gradient), mm (weight
    gradient), a view of the first product and a view of a saved input, then the kernel reading
    both. The kernel and the product's view move up to the first mm, the other view before it,
    and the moved kernel's outputs lose their planned buffers. A kernel input computed by a real
    op between the two keeps the order."""
    from torchneuron.compiler.program import _hoist_product_readers

    def op(name, reads, writes, overload=""):
        return ("op", (name, overload, [], writes, False, name), reads, writes)

    kernel = ("kernel", (0, [12, 13], [(20, torch.float32, None, 4, 12, 0)], [8, 8], []), [12, 13], [20])
    steps = [op("aten::mm", [1, 2], [10]), op("aten::mm", [3, 4], [11]), op("aten::view", [10], [12]),
             op("aten::view", [5], [13]), kernel, op("aten::sum", [20], [21])]
    moved = _hoist_product_readers(list(steps), set())
    assert [s[3] for s in moved] == [[13], [10], [12], [20], [11], [21]]
    assert moved[3][1][2] == [(20, torch.float32, None, -1, -1, 0)]
    # The saved input comes from an op after the first mm: nothing moves.
    steps[3] = op("aten::gelu", [5], [13])
    assert _hoist_product_readers(list(steps), set()) == steps
