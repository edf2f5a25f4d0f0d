"""Tests for the conformance tool's wider coverage: the dtypes beyond float32 / bfloat16 / int64,
the out= check into non-contiguous outputs, the module_db and optim_db entries, sharding,
merging, the per-dtype report and the record written into docs/conformance.md. Each mode gets a
case with a wrong device result injected, which it must report."""

import json
import os
import sys
import types

import pytest
import torch

from conftest import run_in_new_group
from torchneuron import conformance
from torchneuron.conformance import modules, optimizers, out_arg, report
from torchneuron.conformance.samples import _Placement
from torchneuron.conformance.suites import run_suite_entry

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Sample:
    def __init__(self, t, *args, **kwargs):
        self.input, self.args, self.kwargs = t, args, kwargs


class _FakeOp:
    """An OpInfo-like op over every dtype, with an out= variant given by `out_fn`."""
    variant_test_name = ""
    supports_autograd = False

    def __init__(self, name, fn, out_fn=None, dtypes=(torch.float64, torch.complex64, torch.bool)):
        self.name, self.fn, self.out_fn, self.dtypes = name, fn, out_fn, set(dtypes)
        self.supports_out = out_fn is not None

    def supported_dtypes(self, device):
        return self.dtypes

    def sample_inputs(self, device, dtype, requires_grad=False):
        yield _Sample(torch.arange(12, device=device).reshape(3, 4).to(dtype))

    def __call__(self, x, *args, out=None, **kwargs):
        if out is not None:
            return self.out_fn(x, out)
        return self.fn(x)


def _on_neuron(x):
    return x.device.type == "neuron"


def test_new_dtypes_are_defaults_with_tolerances():
    for d in ("float64", "float16", "complex64", "uint16", "uint32", "uint64", "bool"):
        assert d in conformance.DTYPES
        assert d in conformance.TOLERANCES
    ints = torch.tensor([1, 2, 3], dtype=torch.uint16)
    assert conformance.compare(ints, ints, "uint16") is None
    assert conformance.compare(torch.tensor([1, 2, 4], dtype=torch.uint16), ints, "uint16") is not None
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert conformance.compare(x * (1 + 1e-6), x, "float64") is not None  # float64 is tight


def test_wrong_result_in_new_dtypes_is_mismatch():
    wrong = _FakeOp("fake_wrong_any", lambda x: (x.logical_not() if x.dtype == torch.bool else x + 1)
                    if _on_neuron(x) else x)
    right = _FakeOp("fake_right_any", lambda x: x.clone())
    for d in ("float64", "complex64", "bool"):
        assert conformance.run_entry(wrong, d, grad=False)["status"] == "mismatch", d
        assert conformance.run_entry(right, d, grad=False)["status"] == "pass", d
    # A real op in the new dtypes passes, and uint16, which mul's OpInfo does not list, is run
    # since CPU multiplies uint16.
    mul = conformance.all_ops()["mul"]
    for d in ("float64", "complex64", "float16", "uint16"):
        entry = conformance.run_entry(mul, d, grad=False)
        assert entry["status"] == "pass" and entry["samples"] > 0, entry
    assert conformance.run_entry(mul, "uint16", grad=False).get("undeclared") is True


def _writes(values_fn, strided=True):
    """An out= implementation: writes values_fn(x) through `out` (or, with strided=False, into
    the first elements of out's storage as if out were contiguous)."""
    def write(x, out):
        v = values_fn(x)
        if strided:
            out.copy_(v)
        else:
            flat = out.as_strided((v.numel(),), (1,))
            flat.copy_(v.reshape(-1))
        return out
    return write


def test_out_check_reports_wrong_values_and_writes_into_gaps():
    good = _FakeOp("fake_out_good", lambda x: x * 2, _writes(lambda x: x * 2))
    assert conformance.run_entry(good, "float64", grad=False)["status"] == "pass"
    wrong_values = _FakeOp("fake_out_values", lambda x: x * 2,
                           _writes(lambda x: x * 2 + (1 if _on_neuron(x) else 0)))
    entry = conformance.run_entry(wrong_values, "float64", grad=False)
    assert entry["status"] == "mismatch" and entry["detail"].startswith("out=:"), entry
    # A device that ignores out='s strides writes over the gaps of the wider buffer.
    contiguous = _FakeOp("fake_out_contiguous", lambda x: x * 2,
                         lambda x, out: _writes(lambda y: y * 2, strided=not _on_neuron(x))(x, out))
    entry = conformance.run_entry(contiguous, "float64", grad=False)
    assert entry["status"] == "mismatch" and "between the elements" in entry["detail"], entry
    raising = _FakeOp("fake_out_raise", lambda x: x * 2, lambda x, out: (_ for _ in ()).throw(
        RuntimeError("no out= here")) if _on_neuron(x) else _writes(lambda y: y * 2)(x, out))
    entry = conformance.run_entry(raising, "float64", grad=False)
    assert entry["status"] == "error" and "no out= here" in entry["detail"], entry
    # Where CPU's own out= never writes (CPU 2.13's gelu into a non-contiguous out=), the
    # functional result is the reference: the right device passes, a wrong one does not.
    cpu_broken = _FakeOp("fake_out_cpu_broken", lambda x: x * 2,
                         lambda x, out: _writes(lambda y: y * 2)(x, out) if _on_neuron(x) else out)
    assert conformance.run_entry(cpu_broken, "float64", grad=False)["status"] == "pass"
    # Where CPU writes out= as if contiguous (CPU 2.13's narrow_copy, avg_pool3d), the gaps are
    # still held to what they held before: the right device passes.
    cpu_contiguous = _FakeOp("fake_out_cpu_contiguous", lambda x: x * 2,
                             lambda x, out: _writes(lambda y: y * 2, strided=_on_neuron(x))(x, out))
    assert conformance.run_entry(cpu_contiguous, "float64", grad=False)["status"] == "pass"


def test_out_check_on_real_ops():
    ops = conformance.all_ops()
    # matmul of a vector restrides a non-contiguous out= on CPU as on neuron; fft.ihfftn's out=
    # holds other values than its functional result, on CPU as on neuron.
    for key, dtype in (("add", "float32"), ("max.reduction_with_dim", "int64"), ("arange", "float64"),
                       ("matmul", "float32"), ("fft.ihfftn", "float32")):
        entry = conformance.run_entry(ops[key], dtype, grad=False)
        assert entry["status"] == "pass" and entry["out_samples"] > 0, entry


class _FakeFactory(_FakeOp):
    """A factory op whose sample names its device (as arange's does), wrong on neuron."""

    def sample_inputs(self, device, dtype, requires_grad=False):
        yield _Sample(3, dtype=dtype, device=device)

    def __call__(self, n, dtype=None, device=None):
        return torch.zeros(n, dtype=dtype, device=device) + (torch.device(device).type == "neuron")


def test_factory_samples_run_on_the_device():
    """A factory op's sample names the CPU; the device run must make its result on neuron (it
    ran on the CPU before, so arange and linspace were compared with themselves)."""
    moved = conformance.reference._to_device((3, (), {"device": "cpu"}), "neuron")
    assert moved[2]["device"] == "neuron"
    entry = conformance.run_entry(_FakeFactory("fake_factory", None), "float64", grad=False)
    assert entry["status"] == "mismatch", entry


class _OffByOneOnNeuron(torch.nn.Linear):
    def forward(self, x):
        return super().forward(x) + (1.0 if _on_neuron(x) else 0.0)


class _ContiguousOnNeuron(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return y.contiguous() if _on_neuron(x) else y


class _WrongOnNonContiguous(torch.nn.Module):
    """Right on contiguous inputs, off by one on non-contiguous neuron ones."""

    def forward(self, x):
        return x * 2 + (1.0 if _on_neuron(x) and not x.is_contiguous() else 0.0)


class _CpuFloat32Off(torch.nn.Module):
    """Stands in for a CPU kernel less accurate than ours: exact on neuron and in float64."""

    def forward(self, x):
        return x * 2 + (1e-3 if x.device.type == "cpu" and x.dtype == torch.float32 else 0.0)


def _fake_module_info(cls, ctor_args, shape):
    from torch.testing._internal.common_modules import FunctionInput, ModuleInput

    def inputs(info, device, dtype, requires_grad, training, **kwargs):
        x = torch.randn(shape, device=device, dtype=dtype, requires_grad=requires_grad)
        return [ModuleInput(constructor_input=FunctionInput(*ctor_args),
                            forward_input=FunctionInput(x))]
    return types.SimpleNamespace(module_cls=cls, module_inputs_func=inputs,
                                 train_and_eval_differ=False, dtypes=(torch.float32,))


def _run_module(info, key="module:fake"):
    entry = {"status": "skipped", "detail": ""}

    def merge(status, detail, err):
        conformance.samples._merge(entry, status, detail, err)
    modules.run_module_entry(info, key, "float32", _Placement(), merge, lambda: None)
    return entry


def test_module_entries_compare_forward_backward_and_memory_format():
    assert _run_module(_fake_module_info(torch.nn.Linear, (4, 3), (2, 4)))["status"] == "pass"
    wrong = _run_module(_fake_module_info(_OffByOneOnNeuron, (4, 3), (2, 4)))
    assert wrong["status"] == "mismatch" and "not close" in wrong["detail"], wrong
    layout = _run_module(_fake_module_info(_ContiguousOnNeuron, (), (2, 3, 4, 5)))
    assert layout["status"] == "mismatch" and layout["detail"].startswith("channels_last"), layout
    noncontig = _run_module(_fake_module_info(_WrongOnNonContiguous, (), (2, 3)))
    assert noncontig["status"] == "mismatch" and noncontig["detail"].startswith("non-contiguous"), noncontig
    # Where device and CPU differ, the device passes if it is no further from float64 than CPU.
    assert _run_module(_fake_module_info(_CpuFloat32Off, (), (2, 3)))["status"] == "pass"
    real = run_suite_entry("module:nn.Linear", "float32")
    assert real["status"] == "pass" and real["samples"] > 0, real
    assert "module:nn.Conv2d" in modules.module_infos()
    assert ("module:nn.Linear", "float64") in modules.module_tasks(["nn.Linear"], ["float64", "uint16"])
    assert ("module:nn.Linear", "uint16") not in modules.module_tasks(["nn.Linear"], ["uint16"])


class _WrongSGD(torch.optim.SGD):
    """SGD whose step on neuron moves twice as far."""

    def step(self, closure=None):
        loss = super().step(closure)
        with torch.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if _on_neuron(p) and p.grad is not None:
                        p.add_(p.grad, alpha=-group["lr"])
        return loss


def test_optimizer_entries_compare_steps():
    from torch.testing._internal.common_optimizers import optim_db
    sgd = next(o for o in optim_db if o.name == "SGD")
    wrong = types.SimpleNamespace(**{k: getattr(sgd, k) for k in (
        "optim_inputs_func", "supported_impls", "only_supports_sparse_grads", "step_requires_closure")},
        optim_cls=_WrongSGD, supports_fused_on=())
    entry = {"status": "skipped", "detail": ""}
    optimizers.run_optim_entry(wrong, "float32", _Placement(),
                               lambda s, d, e: conformance.samples._merge(entry, s, d, e), lambda: None)
    assert entry["status"] == "mismatch" and "after step 1" in entry["detail"], entry
    real = run_suite_entry("optim:SGD", "float32")
    assert real["status"] == "pass" and real["samples"] > 0, real
    assert run_suite_entry("optim:SparseAdam", "float32")["status"] == "skipped"


def test_failure_categories_and_dtype_table():
    entries = [
        {"op": "a", "dtype": "uint16", "status": "error", "fallback": {},
         "detail": "RuntimeError: neuron kernels do not handle dtype UInt16"},
        {"op": "b", "dtype": "uint16", "status": "pass", "fallback": {"aten::x": 1}, "detail": ""},
        {"op": "c", "dtype": "float64", "status": "mismatch", "fallback": {}, "detail": "x", "max_abs_err": 1.0},
        {"op": "d", "dtype": "float64", "status": "error", "fallback": {}, "detail": "timeout after 60 s"},
        {"op": "e", "dtype": "float64", "status": "pass", "fallback": {}, "detail": ""},
    ]
    assert [report.failure_category(e) for e in entries if e["status"] != "pass"] == [
        "missing kernel", "wrong answer", "crash or timeout"]
    by = report.totals_by_dtype(entries)
    assert by["uint16"]["pass_rate"] == 0.5 and by["uint16"]["zero_fallback_share"] == 0.0
    assert by["float64"]["pass_rate"] == pytest.approx(1 / 3, abs=1e-3)
    md = report.markdown(entries)
    assert "| uint16 | 1 | 0 | 1 | 0 | 50.0% | 0.0% |" in md and "missing kernel" in md
    assert report.suite_of({"op": "module:nn.Linear"}) == "module_db" and "| OpInfo | 2 | 1 | 2 |" in md


def _tool(tmp_path, *args, timeout=600):
    env = dict(os.environ, TORCHNEURON_FALLBACK="silent",
               PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    return run_in_new_group([sys.executable, "-m", "torchneuron.conformance", *args], timeout,
                            cwd=tmp_path, env=env, capture_output=True, text=True)


def test_cli_modules_optimizers_shards_merge_and_doc(tmp_path):
    common = ["--ops", "abs,nn.ReLU,SGD", "--modules", "--optimizers", "--dtype", "float32,uint16",
              "--jobs", "1"]
    for k in (1, 2):
        proc = _tool(tmp_path, *common, "--shard", f"{k}/2", "--output", f"s{k}.json",
                     "--markdown", f"s{k}.md")
        assert proc.returncode == 0, proc.stderr
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{report.DOC_BEGIN}\nold\n{report.DOC_END}\noutro\n")
    proc = _tool(tmp_path, "--merge", "s1.json", "s2.json", "--output", "all.json",
                 "--markdown", "all.md", "--write-doc", str(page))
    assert proc.returncode == 0, proc.stderr
    merged = json.loads((tmp_path / "all.json").read_text())
    keys = {(e["op"], e["dtype"]) for e in merged["entries"]}
    assert keys == {("abs", "float32"), ("abs", "uint16"), ("module:nn.ReLU", "float32"),
                    ("optim:SGD", "float32")}
    assert {e["status"] for e in merged["entries"]} <= {"pass", "skipped"}
    assert set(merged["by_dtype"]) == {"float32", "uint16"}
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old" not in text
    assert "| float32 |" in text and "native share" in text


def test_ci_modules_and_optimizers_exist():
    assert len(modules.CI_MODULES) >= 15 and len(optimizers.CI_OPTIMIZERS) >= 5
    tasks = modules.module_tasks(modules.CI_MODULES, [modules.CI_DTYPE])
    assert {k for k, _ in tasks} == {modules.PREFIX + n for n in modules.CI_MODULES}
    tasks = optimizers.optim_tasks(optimizers.CI_OPTIMIZERS, ["float32"])
    assert {k for k, _ in tasks} == {optimizers.PREFIX + n for n in optimizers.CI_OPTIMIZERS}


def test_result_that_differs_only_under_a_dispatch_mode_is_judged_by_the_plain_run():
    """The harness watches the device run through a TorchDispatchMode (to list the native ops);
    some composites run another way under any mode (complex linalg.pinv is 1.6 off, on CPU as
    on neuron). Such a sample is rerun without the mode; a device that is wrong either way is
    still reported."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    def off_under_a_mode(x):
        return x + 1 if _on_neuron(x) and _get_current_dispatch_mode() is not None else x.clone()
    entry = conformance.run_entry(_FakeOp("fake_mode_only", off_under_a_mode), "float64", grad=False)
    assert entry["status"] == "pass", entry
    pinv = conformance.run_entry(conformance.all_ops()["linalg.pinv"], "complex64", grad=False)
    assert pinv["status"] == "pass", pinv


def test_float8_dtypes_run_scaled_mm_natively_and_bitwise(tmp_path):
    """torch._scaled_mm's OpInfo (float8 operands and a float8 result: bitwise) in both float8 dtypes."""
    out = tmp_path / "f8.json"
    proc = _tool(tmp_path, "--ops", "torch._scaled_mm", "--dtype", "float8_e4m3fn,float8_e5m2", "--jobs", "1",
                 "--output", str(out), "--markdown", str(tmp_path / "f8.md"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    entries = json.loads(out.read_text())["entries"]
    assert sorted(e["dtype"] for e in entries) == ["float8_e4m3fn", "float8_e5m2"]
    for e in entries:
        assert e["status"] == "pass" and e["samples"] > 0, e
        assert e["native"] == ["aten::_scaled_mm"] and e["fallback"] == {}, e
    assert conformance.TOLERANCES["float8_e4m3fn"] == (0.0, 0.0)
