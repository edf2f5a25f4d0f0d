"""The _foreach ops of the default (foreach) optimizers as single queue commands, against the
same ops on CPU: scalar, scalar-list and list forms, out-of-place sqrt, lists the single
command cannot take (bf16, non-contiguous), and empty tensors."""

import re

import pytest
import torch

from test_nn_ops import assert_same


def lists(count=4, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(3, 5), (7,), (0,), (2, 3, 4)][:count]
    return [torch.randn(s, generator=g).to(dtype) for s in shapes]


def check(fn, *groups):
    cpu = [[t.clone() for t in group] for group in groups]
    dev = [[t.to("neuron") for t in group] for group in groups]
    expected, got = fn(*cpu), fn(*dev)
    for a, b in zip(dev[0], cpu[0]):  # in-place results
        assert_same(a, b)
    if expected is not None:
        for a, b in zip(got, expected):
            assert_same(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_foreach_ops_match_cpu(dtype, no_fallback):
    a, b, c = lists(dtype=dtype, seed=0), lists(dtype=dtype, seed=1), [t.abs() + 0.5 for t in lists(dtype=dtype, seed=2)]
    check(lambda x: torch._foreach_mul_(x, 0.7), a)
    check(lambda x: torch._foreach_mul_(x, [0.5, 2.0, 3.0, -1.0]), a)
    check(lambda x: torch._foreach_div_(x, 3.0), a)
    check(lambda x: torch._foreach_div_(x, [0.5, 2.0, 3.0, 7.0]), a)
    check(lambda x: torch._foreach_add_(x, 1e-3), a)
    check(lambda x, y: torch._foreach_add_(x, y, alpha=-0.25), a, b)
    check(lambda x, y: torch._foreach_lerp_(x, y, 0.1), a, b)
    check(lambda x, y, z: torch._foreach_addcmul_(x, y, z, value=0.01), a, b, c)
    check(lambda x, y, z: torch._foreach_addcdiv_(x, y, z, value=-0.3), a, b, c)
    check(lambda x, y, z: torch._foreach_addcdiv_(x, y, z, [0.1, 0.2, 0.3, 0.4]), a, b, c)
    check(lambda x: torch._foreach_sqrt([t.abs() for t in x]), a)
    check(lambda x: torch._foreach_sqrt_([t.abs_() for t in x]), a)
    for fn, arity in IN_PLACE:
        check(fn, *[a, b, c][:arity])


IN_PLACE = [  # the in-place forms a compiled optimizer step runs on its temporaries
    (lambda x: torch._foreach_sub_(x, 0.5), 1),
    (lambda x, y: torch._foreach_sub_(x, y, alpha=0.25), 2),
    (lambda x, y: torch._foreach_mul_(x, y), 2),
    (lambda x, y: torch._foreach_div_(x, y), 2),
    (lambda x: torch._foreach_neg_(x), 1),
    (lambda x: torch._foreach_reciprocal_(x), 1),
]


def test_in_place_foreach_ops_run_as_one_command(no_fallback):
    groups = [[t.to("neuron") for t in lists(seed=s)] for s in (0, 1)]
    for fn, arity in IN_PLACE:
        assert per_tensor_ops(fn, *groups[:arity]) == []


OUT_OF_PLACE = [
    (lambda x: torch._foreach_add(x, 0.75), 1),
    (lambda x: torch._foreach_sub(x, 2), 1),
    (lambda x: torch._foreach_mul(x, -1.5), 1),
    (lambda x: torch._foreach_div(x, 3.0), 1),
    (lambda x, y: torch._foreach_add(x, y, alpha=-0.25), 2),
    (lambda x, y: torch._foreach_sub(x, y, alpha=2), 2),
    (lambda x, y: torch._foreach_mul(x, y), 2),
    (lambda x, y: torch._foreach_div(x, y), 2),
    (lambda x, y: torch._foreach_lerp(x, y, 0.3), 2),
    (lambda x, y: torch._foreach_lerp(x, y, 0.7), 2),
    (lambda x, y, z: torch._foreach_addcmul(x, y, z, value=0.01), 3),
    (lambda x, y, z: torch._foreach_addcdiv(x, y, z, value=-0.3), 3),
    (lambda x: torch._foreach_neg(x), 1),
    (lambda x: torch._foreach_reciprocal(x), 1),
]


PER_TENSOR_OPS = ("aten::add", "aten::sub", "aten::mul", "aten::div", "aten::addcmul", "aten::addcdiv", "aten::neg",
                  "aten::reciprocal", "aten::pow", "aten::copy_", "aten::lerp")


def per_tensor_ops(fn, *args):
    """The per-tensor ops that fn(*args) ran (none when its foreach op ran as one command)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn(*args)
    return [e.name for e in prof.events() if e.name in PER_TENSOR_OPS]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_out_of_place_foreach_ops_match_cpu_as_one_command(dtype, no_fallback):
    """The out-of-place forms a functionalized graph calls (a compiled optimizer step) match CPU
    and leave their inputs alone; in float32 and float64 each runs as one command, without the
    per-tensor ops of PyTorch's own implementation (bfloat16 takes that path)."""
    groups = [lists(dtype=dtype, seed=0), lists(dtype=dtype, seed=1), [t.abs() + 0.5 for t in lists(dtype=dtype, seed=2)]]
    for fn, arity in OUT_OF_PLACE:
        check(fn, *groups[:arity])
        per_tensor = per_tensor_ops(fn, *[[t.to("neuron") for t in g] for g in groups[:arity]])
        assert (per_tensor == []) == (dtype != torch.bfloat16), per_tensor


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_foreach_ops_of_a_compiled_optimizer_step_run_as_one_command(dtype, no_fallback):
    """What a compiled AdamW step calls on its step counts: powers of a scalar base, and lists
    divided by 0-dim tensors on the device (capturable) or on the CPU (the default), each as one
    command, matching CPU."""
    steps = [torch.tensor(float(k), dtype=dtype) for k in (1, 7, 30, 2)]
    a = lists(dtype=dtype)
    check(lambda x: torch._foreach_pow(0.9, x), steps)
    assert per_tensor_ops(lambda x: torch._foreach_pow(0.9, x), [t.to("neuron") for t in steps]) == []
    for other_device in ("neuron", "cpu"):
        scalars = [torch.tensor(v, dtype=dtype) for v in (0.5, -3.0, 7.0, 0.25)]
        for fn in (lambda x, y: torch._foreach_div(x, y), lambda x, y: torch._foreach_mul(x, y),
                   lambda x, y: torch._foreach_sub(x, y, alpha=0.5), lambda x, y: torch._foreach_add_(x, y, alpha=2)):
            expected = fn([t.clone() for t in a], scalars)
            dev_a, dev_scalars = [t.to("neuron") for t in a], [t.to(other_device) for t in scalars]
            got = fn(dev_a, dev_scalars)
            for x, y in zip(got if got is not None else dev_a, expected if expected is not None else a):
                assert_same(x, y)
            assert per_tensor_ops(fn, dev_a, dev_scalars) == [], other_device


def test_foreach_list_op_with_cpu_scalars_of_another_dtype_promotes_as_cpu_does(no_fallback):
    # A float64 CPU scalar beside a 0-dim float32 tensor makes a float64 result, beside a tensor
    # with dims a float32 one; the per-tensor path, which the list then takes, does both.
    a = [torch.tensor(1.5), torch.randn(3)]
    b = [torch.tensor(0.1, dtype=torch.float64), torch.tensor(0.3, dtype=torch.float64)]
    expected = torch._foreach_div(a, b)
    got = torch._foreach_div([t.to("neuron") for t in a], b)
    assert [t.dtype for t in got] == [torch.float64, torch.float32]
    for x, y in zip(got, expected):
        assert_same(x, y)


def test_foreach_sub_refuses_a_bool_scalar_as_cpu_does(no_fallback):
    for fn in (torch._foreach_sub, torch._foreach_sub_):
        with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
            fn([t.to("neuron") for t in lists()], True)


def test_foreach_lists_of_other_shapes_take_the_per_tensor_path(no_fallback):
    # Equal element counts, other shapes: the per-tensor ops broadcast them as CPU does.
    a, b = [torch.randn(4, 1), torch.randn(3)], [torch.randn(4), torch.randn(1, 3)]
    check(lambda x, y: torch._foreach_add(x, y), a, b)
    check(lambda x, y: torch._foreach_mul(x, y), a, [torch.tensor(2.0), torch.randn(3)])
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch._foreach_add_([t.to("neuron") for t in a], [t.to("neuron") for t in b])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_foreach_copy_as_one_command(dtype, no_fallback):
    src = lists(dtype=dtype, seed=4)
    check(lambda x, y: torch._foreach_copy_(x, y), lists(dtype=dtype), src)
    dev_x, dev_src = [t.to("neuron") for t in lists(dtype=dtype)], [t.to("neuron") for t in src]
    assert per_tensor_ops(lambda: torch._foreach_copy_(dev_x, dev_src)) == []
    # A copy that reads what an earlier one writes runs them in turn, as copy_ one by one does.
    base = torch.arange(12.0, dtype=dtype)
    for make in (lambda b: ([b[0:4], b[4:8]], [b[4:8], b[8:12]]), lambda b: ([b[0:4], b[2:6]], [b[8:12], b[6:10]])):
        expected, dev = base.clone(), base.to("neuron")
        for x, y in zip(*make(expected)):
            x.copy_(y)
        torch._foreach_copy_(*make(dev))
        assert torch.equal(dev.cpu(), expected)


def test_foreach_non_contiguous_lists_take_the_per_tensor_path(no_fallback):
    x = [torch.randn(4, 6).t(), torch.randn(3)]  # a transposed tensor
    assert not x[0].to("neuron").is_contiguous()
    check(lambda t: torch._foreach_mul_(t, 2.0), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("ord", [2, 1, 0, float("inf"), float("-inf"), 3])
def test_foreach_norm_matches_cpu(dtype, ord, no_fallback):
    x = [t for t in lists(dtype=dtype) if t.numel() > 0] + [torch.tensor([0.0, -2.5, 0.0]).to(dtype)]
    check(lambda t: torch._foreach_norm(t, ord), x)


def test_foreach_norm_of_an_empty_tensor(no_fallback):
    check(lambda t: torch._foreach_norm(t, 2), lists())  # holds a (0,) tensor: its norm is 0
    with pytest.raises(RuntimeError, match="empty tensor"):
        torch._foreach_norm([t.to("neuron") for t in lists()], float("inf"))


def test_foreach_mul_by_a_tensor(no_fallback):
    a = lists()
    check(lambda x: torch._foreach_mul_(x, torch.tensor(0.25, device=x[0].device)), a)
    check(lambda x: torch._foreach_mul_(x, torch.tensor(-3.0)), a)  # a CPU scalar tensor travels by value


def test_clip_grad_norm_matches_cpu(no_fallback):
    torch.manual_seed(0)
    cpu = [torch.randn(s, requires_grad=True) for s in [(8, 4), (4,), (3, 3, 3)]]
    dev = [p.detach().to("neuron").requires_grad_() for p in cpu]
    for p, q in zip(cpu, dev):
        p.grad = torch.randn_like(p) * 5
        q.grad = p.grad.to("neuron")
    for max_norm, norm_type in [(1.0, 2.0), (0.5, float("inf")), (2.0, 1.0)]:
        expected = torch.nn.utils.clip_grad_norm_(cpu, max_norm, norm_type)
        got = torch.nn.utils.clip_grad_norm_(dev, max_norm, norm_type)
        assert_same(got, expected)
        for p, q in zip(cpu, dev):
            assert_same(q.grad, p.grad)


def test_foreach_ops_on_tensors_longer_than_one_piece(no_fallback):
    # A command cuts its tensors into pieces of 32768 elements shared across threads.
    g = torch.Generator().manual_seed(3)
    make = lambda: [torch.randn(s, generator=g) for s in [(70001,), (5,), (256, 256)]]  # noqa: E731
    a, b, c = make(), make(), [t.abs() + 0.5 for t in make()]
    check(lambda x, y, z: torch._foreach_addcdiv_(x, y, z, [0.1, 0.2, 0.3]), a, b, c)
    check(lambda x, y: torch._foreach_lerp_(x, y, 0.3), a, b)
    check(lambda x: torch._foreach_mul_(x, torch.tensor(0.5, device=x[0].device)), a)
    check(lambda x: torch._foreach_sqrt([t.abs() for t in x]), a)


def _on_device(x):
    if isinstance(x, torch.Tensor):
        return x.to("neuron")
    if isinstance(x, (list, tuple)):
        return type(x)(_on_device(y) for y in x)
    return x


def _copied(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_copied(y) for y in x)
    return x


NATIVE_FOREACH = {"_foreach_add", "_foreach_sub", "_foreach_mul", "_foreach_div", "_foreach_pow", "_foreach_copy",
                  "_foreach_addcmul", "_foreach_addcdiv", "_foreach_lerp", "_foreach_neg", "_foreach_reciprocal",
                  "_foreach_sqrt"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_foreach_opinfo_samples_match_cpu(dtype, no_fallback):
    """PyTorch's own foreach OpInfo samples (scalar, scalar-list, tensor-list and 0-dim tensor
    operands, lists of 1 and 5 tensors of varied shapes) for the ops with single-command
    kernels, out of place and in place: the same results as CPU, or an error where CPU raises."""
    from torch.testing._internal import common_methods_invocations as cmi

    ops = [op for op in cmi.foreach_unary_op_db + cmi.foreach_binary_op_db + cmi.foreach_pointwise_op_db
           + cmi.foreach_other_op_db if op.name in NATIVE_FOREACH]
    assert {op.name for op in ops} == NATIVE_FOREACH
    checked = 0
    for op in ops:
        for sample in op.sample_inputs("cpu", dtype, num_input_tensors=[1, 5]):
            for fn in (op.op, op.inplace_variant):
                if fn is None:
                    continue
                cpu = _copied([sample.input, sample.args, sample.kwargs])
                dev = _on_device([sample.input, sample.args, sample.kwargs])
                try:
                    expected = fn(cpu[0], *cpu[1], **cpu[2])
                except RuntimeError as error:
                    with pytest.raises(RuntimeError, match=re.escape(str(error)[:40])):
                        fn(dev[0], *dev[1], **dev[2])
                    continue
                got = fn(dev[0], *dev[1], **dev[2])
                if fn is op.inplace_variant:
                    expected, got = cpu[0], dev[0]
                for a, b in zip(got, expected, strict=True):
                    assert_same(a, b)
                checked += 1
    assert checked > 200
