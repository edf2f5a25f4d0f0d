"""CPU fallback for ops without a native kernel: results, counting, once-per-op warnings, modes, native_ops, printing."""

import re
import warnings

import pytest
import torch

import torchneuron

FALLBACK_WARNING = "has no native neuron kernel"


def fallback_warnings(records):
    return [str(r.message) for r in records if FALLBACK_WARNING in str(r.message)]


# gcd and lcm (integers) and renorm (floating point) have no native neuron kernel: the stand-ins for
# "an operator that falls back" (when one of them gets a kernel, pick another from fallback_report()
# of a conformance run).
def calls(report, op):
    """Calls counted for aten::<op>, whichever overload (.default / .out) reached the fallback."""
    return sum(n for name, n in report.items() if re.fullmatch(rf"aten::{op}(\.\w+)?", name))


def ints(*shape):
    return torch.ones(*shape, dtype=torch.int64, device="neuron") * 6


def test_fallback_binary_op_matches_cpu():
    dtype = torch.int64
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(7, 5, generator=g) * 10).to(dtype)
    b = (torch.randn(5, generator=g) * 10).to(dtype)
    result = torch.gcd(a.to("neuron"), b.to("neuron"))
    assert result.device == torch.device("neuron:0")
    assert result.dtype == dtype
    assert torch.equal(result.cpu(), torch.gcd(a, b))
    # Non-contiguous inputs, an out= tensor on the device, and an in-place op.
    t = a.t().to("neuron")
    out = torch.empty(5, 7, dtype=dtype, device="neuron")
    torch.gcd(t, b[:, None].to("neuron"), out=out)
    assert torch.equal(out.cpu(), torch.gcd(a.t(), b[:, None]))
    inplace = a.to("neuron")
    inplace.gcd_(b.to("neuron"))
    assert torch.equal(inplace.cpu(), torch.gcd(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_fallback_float_op_matches_cpu(dtype):
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(7, 5, generator=g) * 10).to(dtype)
    result = torch.renorm(a.to("neuron"), 2, 0, 5.0)
    assert result.device == torch.device("neuron:0")
    assert result.dtype == dtype
    assert torch.equal(result.cpu(), torch.renorm(a, 2, 0, 5.0))
    # A non-contiguous input, an out= tensor on the device, and an in-place op.
    out = torch.empty(5, 7, dtype=dtype, device="neuron")
    torch.renorm(a.t().to("neuron"), 2, 1, 5.0, out=out)
    assert torch.equal(out.cpu(), torch.renorm(a.t(), 2, 1, 5.0))
    inplace = a.to("neuron")
    inplace.renorm_(2, 0, 5.0)
    assert torch.equal(inplace.cpu(), torch.renorm(a, 2, 0, 5.0))


def test_fallback_on_second_device():
    a = torch.arange(6) - 3
    result = torch.gcd(a.to("neuron:1"), a.flip(0).to("neuron:1"))
    assert result.device == torch.device("neuron:1")
    assert torch.equal(result.cpu(), torch.gcd(a, a.flip(0)))


def test_fallback_is_counted():
    torchneuron.reset_fallback_report()
    assert torchneuron.fallback_report() == {}
    x = ints(3)
    torch.gcd(x, x)
    report = torchneuron.fallback_report()
    assert calls(report, "gcd") == 1, report
    torch.gcd(x, x)
    torch.gcd(x, x)
    assert calls(torchneuron.fallback_report(), "gcd") == 3
    # Native ops are not counted.
    y = torch.empty(3, dtype=torch.int64, device="neuron")
    y.copy_(x)
    y.fill_(2)
    assert sum(torchneuron.fallback_report().values()) == 3
    torchneuron.reset_fallback_report()
    assert torchneuron.fallback_report() == {}


def test_fallback_warns_once_per_op():
    torchneuron.set_fallback_mode("warn")
    torchneuron.reset_fallback_report()  # the once-per-op memory starts over
    x = ints(4)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        torch.gcd(x, x)
        torch.gcd(x, x)
        torch.gcd(x, x[:1])
    messages = fallback_warnings(records)
    assert len(messages) == 1, messages
    assert re.search(r"'aten::gcd(\.\w+)?'", messages[0]), messages[0]
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        torch.lcm(x + 1, x)  # another op warns once on its own
        torch.lcm(x + 1, x)
    messages = fallback_warnings(records)
    assert len(messages) == 1 and "aten::lcm" in messages[0], messages


def test_fallback_warning_with_pytest_warns():
    torchneuron.set_fallback_mode("warn")
    torchneuron.reset_fallback_report()
    with pytest.warns(UserWarning, match=r"aten::lcm.*no native neuron kernel"):
        torch.lcm(ints(2), ints(2) - 2)


def test_silent_mode_counts_without_warning():
    torchneuron.reset_fallback_report()
    torchneuron.set_fallback_mode("silent")
    assert torchneuron.fallback_mode() == "silent"
    x = torch.arange(3).to("neuron")
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        result = torch.gcd(x + 4, x)
    assert fallback_warnings(records) == []
    assert torch.equal(result.cpu(), torch.gcd(torch.arange(3) + 4, torch.arange(3)))
    assert calls(torchneuron.fallback_report(), "gcd") == 1


def test_error_mode_raises_not_implemented():
    torchneuron.set_fallback_mode("error")
    assert torchneuron.fallback_mode() == "error"
    x = ints(3)
    with pytest.raises(NotImplementedError, match=r"aten::gcd") as info:
        torch.gcd(x, x)
    assert "TORCHNEURON_FALLBACK" in str(info.value)
    # Native ops still run.
    y = torch.empty(3, dtype=torch.int64, device="neuron")
    y.copy_(x)
    assert torch.equal(y.cpu(), torch.full((3,), 6))


def test_set_fallback_mode_rejects_unknown():
    with pytest.raises(ValueError, match="warn"):
        torchneuron.set_fallback_mode("loud")
    assert torchneuron.fallback_mode() in ("warn", "silent", "error")


def test_error_mode_from_env(run_python):
    code = (
        "import torch, torchneuron\n"
        "print(torchneuron.fallback_mode())\n"
        "x = torch.ones(2, dtype=torch.int64, device='neuron')\n"
        "try:\n"
        "    torch.gcd(x, x)\n"
        "except NotImplementedError as e:\n"
        "    print('NotImplementedError', e)\n"
    )
    result = run_python(code, env={"TORCHNEURON_FALLBACK": "error"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "error"
    assert lines[1].startswith("NotImplementedError") and "aten::gcd" in lines[1]


def test_silent_mode_from_env(run_python):
    code = (
        "import warnings, torch, torchneuron\n"
        "warnings.simplefilter('always')\n"
        "print(torchneuron.fallback_mode(), (torch.ones(2, device='neuron') * 3).cpu().tolist())\n"
    )
    result = run_python(code, env={"TORCHNEURON_FALLBACK": "silent"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "silent [3.0, 3.0]"
    assert FALLBACK_WARNING not in result.stderr


def test_invalid_fallback_env_fails_import(run_python):
    result = run_python("import torch", env={"TORCHNEURON_FALLBACK": "sometimes"})
    assert result.returncode != 0
    for word in ("sometimes", "warn", "silent", "error", "TORCHNEURON_FALLBACK"):
        assert word in result.stderr, result.stderr


def test_native_ops_listing():
    ops = torchneuron.native_ops()
    assert ops == sorted(ops)
    for name in ("aten::empty.memory_format", "aten::_copy_from", "aten::empty_strided",
                 "aten::fill_.Scalar", "aten::_local_scalar_dense"):
        assert name in ops
    assert "aten::add.Tensor" in ops
    assert "aten::gcd" not in ops and "aten::gcd.out" not in ops
    assert all(name.startswith("aten::") for name in ops)


def test_native_ops_do_not_fall_back():
    torchneuron.reset_fallback_report()
    torchneuron.set_fallback_mode("error")
    x = torch.empty(4, 4, device="neuron")
    x.fill_(1.0)
    x.zero_()
    y = x.t().contiguous().view(16)
    y.normal_()
    y.uniform_()
    z = y.to(torch.float16).cpu()
    assert z.shape == (16,)
    assert torchneuron.fallback_report() == {}


@pytest.mark.parametrize(
    "cpu",
    [torch.arange(3.0), torch.arange(6).reshape(2, 3), torch.tensor([1.5, -2.25], dtype=torch.bfloat16),
     torch.tensor(True), torch.empty(0)],
    ids=["float", "int64", "bfloat16", "bool_scalar", "empty"],
)
def test_printing(cpu):
    dev = cpu.to("neuron")
    text = repr(dev)
    assert "device='neuron:0'" in text
    cpu_text = repr(cpu)
    # Same numbers as the CPU tensor, with the device added before the dtype/closing paren.
    assert text.replace(", device='neuron:0'", "") == cpu_text
    assert str(dev) == text


def test_printing_second_device():
    text = repr(torch.tensor([1.0, 2.0]).to("neuron:1"))
    assert text == "tensor([1., 2.], device='neuron:1')"
