"""torch.compile(backend="neuron") of optimizer steps and foreach ops: write-back copies grouped
into one command, foreach ops in place on temporaries nothing reads later, a compiled AdamW step
tracking CPU PyTorch's, and foreach kernels (chains of foreach ops run over whole lists in one
generated kernel): their operand kinds, layouts and dtypes, and where foreach commands run
instead."""

import copy

import pytest
import torch
from torch import nn

import torchneuron

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def test_write_back_copies_group_only_where_the_order_of_copies_cannot_matter(no_fallback):
    """Device-to-device copy_ runs become one _foreach_copy_ after the run; not when another copy
    in the run reads or writes one of their tensors (moving them would change what it sees)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchneuron.compiler import lowering

    def independent(a, b, c, d, host, e):
        a.copy_(b)
        c.copy_(d)
        host.copy_(e)

    def dependent(a, b, c, d, host, e):
        a.copy_(b)
        c.copy_(d)
        host.copy_(a)  # reads what the first copy wrote

    for fn, grouped in ((independent, 2), (dependent, 0)):
        args = [torch.randn(4, device="neuron") for _ in range(4)] + [torch.zeros(4), torch.randn(4)]
        gm = make_fx(fn)(*[t.clone() for t in args])
        for node in gm.graph.nodes:  # read the written tensor itself, not copy_'s result: one run
            if node.target is torch.ops.aten.copy_.default and node.args[1].target is torch.ops.aten.copy_.default:
                node.replace_input_with(node.args[1], node.args[1].args[0])
        gm.recompile()
        expected = [t.cpu() for t in args]
        fn(*expected)
        assert lowering.group_write_back_copies(gm) == grouped
        got = [t.clone() for t in args]
        gm(*got)
        for x, y in zip(got, expected):
            torch.testing.assert_close(x.cpu(), y)


def test_foreach_ops_run_in_place_only_on_temporaries_nothing_reads_later(monkeypatch, no_fallback):
    """Without foreach kernels, a chain of out-of-place foreach ops runs in place on its
    temporaries; one that the graph returns, or that a later op still reads, keeps its own values."""
    import torchneuron.compiler

    monkeypatch.setattr(torchneuron.compiler, "foreach_kernels", False)
    def chain(xs, ys):
        roots = torch._foreach_sqrt(xs)
        kept = torch._foreach_add(roots, 1.0)  # returned: never overwritten
        scaled = torch._foreach_mul(kept, 3.0)
        shifted = torch._foreach_sub(scaled, ys)  # scaled is read again below
        return kept, torch._foreach_div(torch._foreach_neg(shifted), scaled)

    def twice(xs, ys):  # the same temporary at two indices: in place, it would be updated twice
        roots = torch._foreach_sqrt(xs)
        return torch._foreach_add([roots[0], roots[0]], 1.0)

    def viewed(xs, ys):  # a view of one temporary read beside another's update
        roots = torch._foreach_sqrt(xs)
        return torch._foreach_mul([roots[0], roots[1]], [roots[1][:1].sum() * ys[0], roots[0].view(-1)[:7]])

    xs = [torch.rand(5, 3) + 0.1, torch.rand(7) + 0.1]
    ys = [torch.randn(5, 3), torch.randn(7)]
    for fn in (chain, twice, viewed):
        torch._dynamo.reset()
        expected = fn(xs, ys)
        got = torch.compile(fn, backend="neuron")([x.to("neuron") for x in xs], [y.to("neuron") for y in ys])
        for g, e in zip(got, expected):
            for a, b in zip(g, e) if isinstance(g, (list, tuple)) else [(g, e)]:
                torch.testing.assert_close(a.cpu(), b)


@pytest.mark.parametrize("foreach_kernels", [True, False], ids=["foreach_kernel", "foreach_commands"])
@pytest.mark.parametrize("capturable", [False, True], ids=["cpu_steps", "capturable"])
def test_compiled_optimizer_step_tracks_eager_and_writes_back_in_one_command(capturable, foreach_kernels, monkeypatch,
                                                                            no_fallback):
    """torch.compile(optimizer.step) on AdamW: the parameters and state track CPU PyTorch's AdamW
    over several steps; the write-backs of the updated parameters and moments (three copy_ per
    parameter) run as one _foreach_copy_, the step counts (CPU tensors unless capturable) are
    copied on their own; the first moment's _foreach_lerp_, which Dynamo writes out, is one
    _foreach_lerp again; the bias corrections computed from CPU step counts run once on the
    stacked counts, not per parameter (two pows, not two per parameter). The update itself runs
    as one foreach kernel (with capturable steps, reading the bias corrections computed from them;
    with CPU ones, reading the stacked corrections whole, not unbound), which writes the state
    back itself, or, without foreach kernels, as foreach commands, in place on the temporaries
    nothing reads later."""
    import torchneuron.compiler
    from torchneuron.compiler import lowering

    monkeypatch.setattr(torchneuron.compiler, "foreach_kernels", foreach_kernels)
    counts = {}

    def counting(name):
        rewrite = getattr(lowering, name)
        monkeypatch.setattr(lowering, name,
                            lambda gm, **kw: counts.setdefault(name, []).append(rewrite(gm, **kw)) or counts[name][-1])

    for name in ("group_write_back_copies", "restore_foreach_lerp", "foreach_in_place_on_dying_lists"):
        counting(name)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Linear(5, 3))
    reference, compiled = copy.deepcopy(model), copy.deepcopy(model).to("neuron")
    optimizers = [torch.optim.AdamW(reference.parameters(), lr=0.05),  # CPU: never capturable
                  torch.optim.AdamW(compiled.parameters(), lr=0.05, capturable=capturable)]
    step = torch.compile(optimizers[1].step, backend="neuron")
    for _ in range(4):
        grads = [torch.randn_like(p) for p in model.parameters()]
        for m in (reference, compiled):
            for p, g in zip(m.parameters(), grads):
                p.grad = g.to(p.device)
        optimizers[0].step()
        step()
    for p, q in zip(reference.parameters(), compiled.parameters()):
        torch.testing.assert_close(q.cpu(), p, rtol=1e-4, atol=1e-5)  # bias corrections in float, not double
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(optimizers[1].state[q][key].cpu(), optimizers[0].state[p][key])
    parameters = len(list(model.parameters()))
    assert parameters * 3 + parameters * capturable in counts["group_write_back_copies"]
    assert 1 in counts["restore_foreach_lerp"]  # the first moment's update runs as _foreach_lerp again
    if foreach_kernels:  # every foreach op of the update in one kernel, which writes the state back itself
        stats = torchneuron.compile_stats()
        assert stats["kernels_generated"] == 1 and stats["ops_lowered"] >= 10, stats
        assert stats["foreach_in_place"] == 4, stats
    else:
        # In place on temporaries: the second moment's update, the denominator's three steps after
        # its square root, and the parameters' update after their weight decay.
        assert max(counts["foreach_in_place_on_dying_lists"]) >= 5
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    pows = [e for e in prof.events() if e.name == "aten::pow" and (e.cpu_parent is None or e.cpu_parent.name != "aten::pow")]
    assert len(pows) == (0 if capturable else 2)
    if foreach_kernels:  # the kernel reads the stacked bias corrections whole: one unbind left, the step counts'
        unbinds = [e for e in prof.events() if e.name == "aten::unbind"]
        assert len(unbinds) == (0 if capturable else 1)


def _foreach_chain(xs, ys, zs, device_scale, cpu_scales, device_scalars):
    """Foreach ops of every operand kind a foreach kernel takes: whole lists, a scalar, alpha,
    one 0-dim tensor for every index (on the device, and on the CPU), a 0-dim tensor per index
    (on the CPU, copied by value, and on the device), lerp from both ends, and unary ops."""
    a = torch._foreach_add(xs, ys, alpha=0.5)
    b = torch._foreach_mul(a, device_scale)
    c = torch._foreach_div(b, cpu_scales)
    d = torch._foreach_addcmul(c, ys, zs, value=-0.25)
    e = torch._foreach_lerp(d, zs, 0.3)
    f = torch._foreach_lerp(e, xs, 0.8)
    g = torch._foreach_addcdiv(f, torch._foreach_exp(xs), torch._foreach_add(torch._foreach_abs(zs), 1.0), value=2.0)
    h = torch._foreach_sub(torch._foreach_sqrt(torch._foreach_abs(g)), device_scalars)
    return torch._foreach_maximum(torch._foreach_mul(h, torch.tensor(1.5)), torch._foreach_neg(ys)), b


def _foreach_inputs(dtype, device):
    g = torch.Generator().manual_seed(0)
    shapes = [(5, 3), (7,), (2, 4, 6), (1,), (300, 129)]
    lists = [[torch.randn(s, generator=g, dtype=dtype) for s in shapes] for _ in range(3)]
    scale = torch.tensor(1.25, dtype=dtype)
    cpu_scales = [torch.tensor(0.5 + i, dtype=dtype) for i in range(len(shapes))]
    scalars = [torch.tensor(0.1 * i, dtype=dtype) for i in range(len(shapes))]
    moved = [[t.to(device) for t in ts] for ts in lists]
    return (*moved, scale.to(device), cpu_scales, [s.to(device) for s in scalars])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_foreach_chain_runs_as_one_kernel_over_its_lists(dtype, no_fallback):
    """A chain of foreach ops over lists of different sizes lowers into one generated kernel run
    over every index in one device job; its results match CPU PyTorch's eager foreach ops, in
    their layouts."""
    compiled = torch.compile(_foreach_chain, backend="neuron")
    got = compiled(*_foreach_inputs(dtype, "neuron"))
    expected = _foreach_chain(*_foreach_inputs(dtype, "cpu"))
    for g, e in zip(got, expected):
        for a, b in zip(g, e):
            torch.testing.assert_close(a.cpu(), b)
            assert a.stride() == b.stride()
    stats = torchneuron.compile_stats()
    assert stats["kernels_generated"] == 1 and stats["ops_lowered"] >= 15 and stats["graphs_eager"] == 0, stats


def test_foreach_kernel_reads_strided_and_empty_tensors_and_keeps_their_layout(no_fallback):
    """Transposed, channels-last and sliced list elements take the kernel's strided path, and
    results keep eager mode's layout (a dense input's strides); an empty tensor is skipped."""
    def fn(xs, ys):
        return torch._foreach_add(torch._foreach_mul(xs, 2.0), ys)

    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(6, 4, generator=g).t(), torch.randn(2, 3, 5, 4, generator=g).to(memory_format=torch.channels_last),
          torch.randn(10, 8, generator=g)[::2, 1:], torch.randn(0, 3)]
    ys = [torch.randn(x.shape, generator=g) for x in xs]
    got = torch.compile(fn, backend="neuron")([x.to("neuron") for x in xs], [y.to("neuron") for y in ys])
    for a, b in zip(got, fn(xs, ys)):
        torch.testing.assert_close(a.cpu(), b)
        assert a.stride() == b.stride(), (a.stride(), b.stride())
    assert torchneuron.compile_stats()["kernels_generated"] == 1


def test_foreach_kernel_in_bfloat16_computes_in_float(no_fallback):
    """bfloat16 lists: the kernel keeps intermediates in float and rounds what it stores, as
    Inductor does: the float32 chain rounded once (within a bfloat16 rounding step of it, since
    CPU PyTorch's float32 addcmul may round differently), where eager mode rounds after each op."""
    def fn(xs, ys):
        return torch._foreach_addcmul(torch._foreach_mul(xs, 0.3), xs, ys, value=0.7)

    g = torch.Generator().manual_seed(2)
    xs = [torch.randn(33, 17, generator=g), torch.randn(100, generator=g)]
    ys = [torch.randn(x.shape, generator=g) for x in xs]
    got = torch.compile(fn, backend="neuron")([x.bfloat16().to("neuron") for x in xs], [y.bfloat16().to("neuron") for y in ys])
    for a, b in zip(got, fn([x.bfloat16().float() for x in xs], [y.bfloat16().float() for y in ys])):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a.cpu(), b.bfloat16())
    assert torchneuron.compile_stats()["kernels_generated"] == 1


def test_foreach_ops_a_kernel_cannot_take_keep_their_commands(no_fallback):
    """Lists of mixed dtypes, per-index Python scalars, integer lists, and 0-dim results stay
    foreach commands (no kernel), with the same results as CPU; and with the Python step loop
    instead of the native executor, the chain of a foreach kernel runs as commands too."""
    def mixed(xs, ys, counts, steps):
        return (torch._foreach_add(xs, ys), torch._foreach_mul(ys, [2.0, 3.0]), torch._foreach_add(counts, 1),
                torch._foreach_add(steps, 1.0))

    xs = [torch.randn(4), torch.randn(3).double()]
    ys = [torch.randn(4), torch.randn(3)]
    counts = [torch.arange(4), torch.arange(3)]
    steps = [torch.tensor(1.0), torch.tensor(2.0)]
    args = (xs, ys, counts, steps)
    got = torch.compile(mixed, backend="neuron")(*[[t.to("neuron") for t in ts] for ts in args])
    for g, e in zip(got, mixed(*args)):
        for a, b in zip(g, e):
            torch.testing.assert_close(a.cpu(), b)
    assert torchneuron.compile_stats()["kernels_generated"] == 0


def test_foreach_kernel_falls_back_to_commands_on_the_python_step_loop(monkeypatch, no_fallback):
    """Only the native executor runs foreach kernels; a program on the Python step loop runs the
    chain as foreach commands, with the same results."""
    from torchneuron.compiler import program

    monkeypatch.setattr(program, "native_executor", False)
    got = torch.compile(_foreach_chain, backend="neuron")(*_foreach_inputs(torch.float32, "neuron"))
    expected = _foreach_chain(*_foreach_inputs(torch.float32, "cpu"))
    for g, e in zip(got, expected):
        for a, b in zip(g, e):
            torch.testing.assert_close(a.cpu(), b)
    stats = torchneuron.compile_stats()
    assert stats["graphs_native"] == 0 and stats["kernels_generated"] == 0 and stats["graphs_eager"] == 0, stats


def test_foreach_kernel_reads_inputs_before_the_graph_writes_them_back(no_fallback):
    """A foreach op waits for its kernel until something else needs it, but not past a write
    to a tensor it reads: here the write-back of an input updated in place after the foreach
    op read it, and the in-place update of an element of its list."""
    def fn(xs, ys):
        doubled = torch._foreach_mul(xs, 2.0)
        xs[0].add_(1.0)
        shifted = torch._foreach_add(ys, doubled)
        ys[1].mul_(3.0)
        return torch._foreach_sub(shifted, xs), ys[1] + 1

    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(4, 3, generator=g), torch.randn(5, generator=g)]
    ys = [torch.randn(4, 3, generator=g), torch.randn(5, generator=g)]
    got_xs, got_ys = [x.to("neuron") for x in xs], [y.to("neuron") for y in ys]
    got = torch.compile(fn, backend="neuron")(got_xs, got_ys)
    expected = fn(xs, ys)
    for a, b in zip(got[0], expected[0]):
        torch.testing.assert_close(a.cpu(), b)
    torch.testing.assert_close(got[1].cpu(), expected[1])
    for a, b in zip(got_xs + got_ys, xs + ys):
        torch.testing.assert_close(a.cpu(), b)
    assert torchneuron.compile_stats()["graphs_eager"] == 0


def test_foreach_kernel_writes_results_back_in_place_only_where_memory_allows(no_fallback):
    """A foreach kernel whose results the graph only copies back into its inputs writes them there
    itself; called with inputs whose memory meets another index's (overlapping views of one
    buffer), it writes new tensors and the copies run in turn, as eager mode's would."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchneuron.compiler import compile_graph

    def update(x0, x1, y0, y1):
        xs = [x0, x1]
        torch._foreach_copy_(xs, torch._foreach_addcmul(torch._foreach_mul(xs, 0.9), [y0, y1], [y0, y1], value=0.1))
        return [y0 + 1]  # a list of outputs, as AOTAutograd's graphs have

    g = torch.Generator().manual_seed(4)
    base = torch.randn(12, generator=g)
    ys = [torch.randn(6, generator=g), torch.randn(6, generator=g)]
    program = compile_graph(make_fx(update)(base[:6].to("neuron"), base[6:].to("neuron"), *[y.to("neuron") for y in ys]),
                            None)
    for views in ((slice(0, 6), slice(6, 12)), (slice(0, 6), slice(3, 9))):  # apart, then overlapping
        torchneuron.reset_compile_stats()
        expected_base = base.clone()
        update(*[expected_base[v] for v in views], *ys)
        got_base = base.to("neuron")
        program(*[got_base[v] for v in views], *[y.to("neuron") for y in ys])
        torch.testing.assert_close(got_base.cpu(), expected_base)
        assert torchneuron.compile_stats()["foreach_in_place"] == (1 if views[1].start == 6 else 0)


def test_foreach_kernel_takes_every_unary_op_and_scalar_form(no_fallback):
    """Every unary foreach op with a code template, and the binary ones' other forms (pow by a
    scalar and by a list, minimum, clamps, division by one 0-dim tensor, subtraction of a list
    with alpha), in one kernel: the same results as CPU PyTorch's foreach ops."""
    from torchneuron.compiler.lowering import _FOREACH_POINTWISE

    unary = sorted({op for target, op in _FOREACH_POINTWISE.items() if target.overloadpacket.__name__.endswith(op)
                    and target._overloadname == "default"})
    assert len(unary) >= 20

    def fn(xs, ys, scale):
        positive = torch._foreach_add(torch._foreach_abs(xs), 0.5)
        results = [getattr(torch, f"_foreach_{name}")(positive if name.startswith(("log", "sqrt", "rsqrt")) else xs)
                   for name in unary]
        results.append(torch._foreach_pow(positive, 1.7))
        results.append(torch._foreach_pow(positive, ys))
        results.append(torch._foreach_minimum(xs, ys))
        results.append(torch._foreach_clamp_max(torch._foreach_clamp_min(xs, -0.5), 0.7))
        results.append(torch._foreach_div(xs, scale))
        results.append(torch._foreach_sub(xs, ys, alpha=2.5))
        return results

    g = torch.Generator().manual_seed(5)
    xs = [torch.randn(s, generator=g, dtype=torch.float64) for s in ((3, 4), (17,), (2, 2, 5))]
    ys = [torch.randn(x.shape, generator=g, dtype=torch.float64) for x in xs]
    scale = torch.tensor(-1.5, dtype=torch.float64)
    got = torch.compile(fn, backend="neuron")([x.to("neuron") for x in xs], [y.to("neuron") for y in ys], scale.to("neuron"))
    for g_list, e_list in zip(got, fn(xs, ys, scale), strict=True):
        for a, b in zip(g_list, e_list, strict=True):
            torch.testing.assert_close(a.cpu(), b, equal_nan=True)
    stats = torchneuron.compile_stats()
    assert stats["kernels_generated"] == 1 and stats["graphs_eager"] == 0, stats


def test_foreach_kernel_reads_one_element_of_a_stacked_vector_as_one_value(no_fallback):
    """CPU values per index, stacked once (an optimizer's bias corrections), reach a foreach kernel
    whole; one element of them read as the value for every index stays that one value."""
    def fn(xs, steps):
        corrections = torch._foreach_pow(0.9, steps)
        return torch._foreach_mul(torch._foreach_div(xs, corrections), corrections[0])

    g = torch.Generator().manual_seed(6)
    xs = [torch.randn(4, 3, generator=g), torch.randn(5, generator=g), torch.randn(2, 2, generator=g)]
    steps = [torch.tensor(float(i + 1)) for i in range(3)]
    got = torch.compile(fn, backend="neuron")([x.to("neuron") for x in xs], [s.clone() for s in steps])
    for a, b in zip(got, fn(xs, steps), strict=True):
        torch.testing.assert_close(a.cpu(), b)
    assert torchneuron.compile_stats()["kernels_generated"] == 1
