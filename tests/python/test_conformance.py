"""Tests for the OpInfo conformance tool (torchneuron/conformance/)."""

import json
import os
import sys
import textwrap

import pytest
import torch

from conftest import run_in_new_group
from torchneuron import conformance

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASELINE = os.path.join(REPO_ROOT, "tests", "python", "conformance_baseline.json")

# Small OpInfo-like ops for the harness tests; imported by the spawned workers via --extra-ops.
_FAKE_OPS = textwrap.dedent(
    """
    import time
    import torch

    class Sample:
        def __init__(self, t):
            self.input, self.args, self.kwargs = t, (), {}

    class FakeOp:
        variant_test_name = ""
        supports_autograd = False

        def __init__(self, name, fn, samples=1):
            self.name, self.fn, self.samples = name, fn, samples

        def supported_dtypes(self, device):
            return {torch.float32}

        def sample_inputs(self, device, dtype, requires_grad=False):
            for _ in range(self.samples):
                yield Sample(torch.arange(4, dtype=dtype, device=device))

        def __call__(self, x, *args, **kwargs):
            return self.fn(x)

    def _wrong(x):
        return x + 1 if x.device.type == "neuron" else x

    def _raise(x):
        if x.device.type == "neuron":
            raise ValueError("fake op failed on neuron")
        return x

    def _sleep(x):
        if x.device.type == "neuron":
            time.sleep(60)
        return x

    def _slowish(x):
        if x.device.type == "neuron":
            time.sleep(1.2)
        return x

    def _cpu_float32_off(x):
        # Stands in for a CPU kernel less accurate than ours: exact on neuron and in float64.
        if x.device.type == "cpu" and x.dtype == torch.float32:
            return x + 1e-3
        return x

    def _crash(x):
        if x.device.type == "neuron":
            import os
            os._exit(3)
        return x

    def _segfault_in_native_code(x):
        if x.device.type == "neuron":
            import ctypes
            ctypes.string_at(0)
        return x

    OPS = [FakeOp("fake_wrong", _wrong), FakeOp("fake_raise", _raise),
           FakeOp("fake_sleep", _sleep), FakeOp("fake_crash", _crash),
           FakeOp("fake_segfault", _segfault_in_native_code),
           FakeOp("fake_ok", lambda x: x * 2), FakeOp("fake_slow_samples", _slowish, samples=4),
           FakeOp("fake_cpu_float32_off", _cpu_float32_off)]
    """
)


def _env(extra_path=None):
    """Environment for the tool's subprocess: repo on the path, backend loaded by the package."""
    env = dict(os.environ)
    env["TORCHNEURON_FALLBACK"] = "silent"
    paths = [REPO_ROOT] + ([str(extra_path)] if extra_path else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    return env


def _run_tool(tmp_path, *args, extra_path=None, timeout=600):
    """Runs `python -m torchneuron.conformance` and returns (process, report dict)."""
    out = tmp_path / "conf.json"
    cmd = [sys.executable, "-m", "torchneuron.conformance", "--output", str(out),
           "--markdown", str(tmp_path / "conf.md"), *args]
    proc = run_in_new_group(cmd, timeout, cwd=tmp_path, env=_env(extra_path), capture_output=True, text=True)
    report = json.loads(out.read_text()) if out.exists() else None
    return proc, report


def _by_key(report):
    return {(e["op"], e["dtype"]): e for e in report["entries"]}


def test_small_run_statuses_and_placement(tmp_path):
    proc, report = _run_tool(tmp_path, "--ops", "add,renorm,sum", "--dtype", "float32",
                             "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    entries = _by_key(report)
    assert set(entries) == {("add", "float32"), ("renorm", "float32"), ("sum", "float32")}
    for entry in entries.values():
        assert entry["status"] == "pass", entry
        assert entry["samples"] > 0
    assert any(name.startswith("aten::add.") for name in entries[("add", "float32")]["native"])
    assert not any(name.startswith("aten::add.") for name in entries[("add", "float32")]["fallback"])
    assert any(name.startswith("aten::renorm") for name in entries[("renorm", "float32")]["fallback"])
    assert report["totals"]["pass"] == 3 and report["totals"]["total"] == 3
    md = (tmp_path / "conf.md").read_text()
    assert "Most frequent fallback ops" in md and "aten::renorm" in md


def test_compare_detects_wrong_values():
    expected = torch.tensor([1.0, 2.0, 3.0])
    assert conformance.compare(expected.clone(), expected, "float32") is None
    assert conformance.compare(expected + 0.5, expected, "float32") is not None
    assert conformance.max_abs_error(expected + 0.5, expected) == pytest.approx(0.5)
    # Tolerance follows the outputs' dtype: bfloat16 is looser, int64 exact, and float outputs
    # of an int64 sample are compared as floats.
    halves = expected.bfloat16()
    assert conformance.compare(halves * (1 + 1e-2), halves, "bfloat16") is None
    assert conformance.compare(expected * (1 + 1e-3), expected, "int64") is not None
    assert conformance.compare(expected * (1 + 1e-7), expected, "int64") is None
    ints = torch.tensor([1, 2, 3])
    assert conformance.compare(ints + 1, ints, "int64") is not None


def _load_fake_ops(tmp_path, monkeypatch):
    (tmp_path / "fake_conformance_ops.py").write_text(_FAKE_OPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    return {op.name: op for op in importlib.import_module("fake_conformance_ops").OPS}


def test_wrong_result_is_mismatch_and_raise_is_error(tmp_path, monkeypatch):
    ops = _load_fake_ops(tmp_path, monkeypatch)
    wrong = conformance.run_entry(ops["fake_wrong"], "float32", grad=False)
    assert wrong["status"] == "mismatch"
    assert wrong["max_abs_err"] == pytest.approx(1.0)
    raised = conformance.run_entry(ops["fake_raise"], "float32", grad=False)
    assert raised["status"] == "error"
    assert raised["detail"].startswith("ValueError: fake op failed on neuron")
    # A wrong device result does not pass on the float64 reference either.
    assert wrong["float64_arbitrated"] == 0
    skipped = conformance.run_entry(ops["fake_ok"], "int64", grad=False)
    assert skipped["status"] == "skipped" and "not supported" in skipped["detail"]


def test_float64_reference_decides_when_cpu_is_the_inaccurate_one(tmp_path, monkeypatch):
    ops = _load_fake_ops(tmp_path, monkeypatch)
    entry = conformance.run_entry(ops["fake_cpu_float32_off"], "float32", grad=False)
    assert entry["status"] == "pass" and entry["float64_arbitrated"] == 1
    md = conformance.markdown([entry])
    assert "passed on a float64 reference" in md and "fake_cpu_float32_off float32" in md
    # The real case: a one-element layer norm's weight gradient is exactly 0. CPU float32's
    # vectorized kernels (AVX2, AVX-512) give about 2.4e-5; its baseline kernel gives 0, and then
    # there is nothing to arbitrate, so the expectation follows what CPU computes at this level.
    from torch.testing._internal.common_methods_invocations import op_db
    layer_norm = next(op for op in op_db if op.name == "nn.functional.layer_norm")
    entry = conformance.run_entry(layer_norm, "float32")
    assert entry["status"] == "pass", entry
    if _cpu_one_element_layer_norm_weight_grad_is_off(layer_norm):
        assert entry["float64_arbitrated"] >= 1, entry


def _cpu_one_element_layer_norm_weight_grad_is_off(layer_norm):
    """Whether CPU float32 gives a one-element layer norm's weight a gradient beyond the
    tolerance, for any of the samples run_entry runs (the exact gradient is 0)."""
    torch.manual_seed(0)
    samples = layer_norm.sample_inputs("cpu", torch.float32, requires_grad=True)
    for sample in list(samples)[:conformance.MAX_SAMPLES]:
        shape, weight = sample.args[0], sample.args[1] if len(sample.args) > 1 else None
        if weight is None or weight.numel() != 1 or tuple(shape) != (1,):
            continue
        out = torch.nn.functional.layer_norm(sample.input, shape, *sample.args[1:], **sample.kwargs)
        (grad,) = torch.autograd.grad(out.sum(), weight)
        if grad.abs().max() > 1e-5:
            return True
    return False


def test_float64_reference_passes_a_device_result_no_less_accurate_than_cpu():
    """Where device and CPU both stray from the float64 result by more than the tolerance (a
    difference of close bfloat16 values), the device passes if at every element it is no
    further from float64 than CPU is, within the tolerance; a device further off, or with NaNs
    where CPU has none, still mismatches."""
    reference = conformance._Float64Reference(op=None, sample=None, grad=False, dtype="bfloat16")
    exact = torch.tensor([0.0, 1.0, 3.0, float("nan")], dtype=torch.float64)
    reference.results = {"out": exact}
    cpu = torch.tensor([0.0625, 1.0, 3.0, float("nan")], dtype=torch.bfloat16)
    closer = torch.tensor([-0.046875, 1.0, 3.0, float("nan")], dtype=torch.bfloat16)
    further = torch.tensor([0.125, 1.0, 3.0, float("nan")], dtype=torch.bfloat16)
    new_nan = torch.tensor([0.0625, float("nan"), 3.0, float("nan")], dtype=torch.bfloat16)
    assert conformance.compare(closer, cpu, "bfloat16") is not None  # they do differ
    assert conformance.compare(closer, exact.to(torch.bfloat16), "bfloat16") is not None  # so does float64
    assert reference.matches(closer, cpu, "out")
    assert not reference.matches(further, cpu, "out")
    assert not reference.matches(new_nan, cpu, "out")
    # An int64 sample is arbitrated only where its outputs are floating (hfft2 of integers).
    ints = torch.tensor([1, 2])
    assert not conformance._Float64Reference(None, None, False, "int64").matches(ints, ints + 1, "out")
    widened = conformance._Float64Reference(op=None, sample=None, grad=False, dtype="int64")
    widened.results = {"out": exact}
    assert widened.matches(closer.float(), cpu.float(), "out")
    assert not widened.matches(further.float(), cpu.float(), "out")


def test_scipy_arbitrates_float64_special_functions():
    """float64 has nothing wider to ask, but torch.special's functions have SciPy twins: CPU's
    float64 J0 at 5.0001 is 3.8e-7 off (past float64's 1e-7 tolerance), so a device result equal
    to SciPy's passes; one that strays from SciPy more than CPU does, and an op without a twin,
    still mismatch."""
    import types
    scipy_special = pytest.importorskip("scipy.special")
    x = torch.tensor([5.0001, -5.0001, 1.5, 0.0], dtype=torch.float64)
    sample = types.SimpleNamespace(input=x, args=(), kwargs={})
    cpu = torch.special.bessel_j0(x)
    truth = torch.from_numpy(scipy_special.j0(x.numpy()))
    assert conformance.compare(truth, cpu, "float64") is not None
    j0 = types.SimpleNamespace(name="special.bessel_j0")
    assert conformance._Float64Reference(j0, sample, False, "float64").matches(truth, cpu, "out")
    assert not conformance._Float64Reference(j0, sample, False, "float64").matches(truth + 1e-4, cpu, "out")
    other = types.SimpleNamespace(name="sin")
    assert not conformance._Float64Reference(other, sample, False, "float64").matches(truth, cpu, "out")


def test_results_are_read_after_the_device_is_synchronized(monkeypatch):
    """`to("cpu", non_blocking=True)` copies into pinned memory asynchronously (as on CUDA; a
    full run once saw `to` float64 8.96 off): the tool waits for the device before it compares
    what the op returned."""
    import contextlib
    import types
    from torchneuron.conformance import samples
    synchronized = []
    real_synchronize, real_compare = torch.neuron.synchronize, samples.compare

    def synchronize(*args):
        synchronized.append(True)
        return real_synchronize(*args)

    def compare(actual, expected, dtype):
        assert synchronized, "compared before the device was synchronized"
        return real_compare(actual, expected, dtype)
    monkeypatch.setattr(torch.neuron, "synchronize", synchronize)
    monkeypatch.setattr(samples, "compare", compare)
    x = torch.randn(1 << 16, dtype=torch.float64)
    sample = types.SimpleNamespace(input=x, args=(), kwargs={})
    status, detail, _ = samples._device_run(lambda t: (t * 2.0).to("cpu", non_blocking=True), sample, "float64",
                                            False, contextlib.nullcontext(), False, frozenset(), (x * 2.0, None))
    assert status == "pass", detail


def test_index_tensors_an_opinfo_keeps_on_the_cpu_stay_there():
    """tensor_split's OpInfo makes its index tensors on the CPU whatever the device (torch
    requires them there); the harness finds them in the samples made for the meta device and
    leaves them on the CPU for the device run, instead of reporting the op's refusal as an error."""
    from torch.testing._internal.common_methods_invocations import op_db
    op = next(o for o in op_db if o.name == "tensor_split")
    samples = list(op.sample_inputs("cpu", torch.float32))
    probes = conformance._meta_probes(op, torch.float32, False, len(samples))
    kept = [conformance._host_leaves(s, p) for s, p in zip(samples, probes)]
    assert sum(1 for k in kept if k) == 4  # the four cases with index tensors
    entry = conformance.run_entry(op, "float32")
    assert entry["status"] == "pass", entry
    # Index tensors an OpInfo makes on the device still move there.
    index_select = next(o for o in op_db if o.name == "index_select")
    samples = list(index_select.sample_inputs("cpu", torch.float32))
    probes = conformance._meta_probes(index_select, torch.float32, False, len(samples))
    assert not any(conformance._host_leaves(s, p) for s, p in zip(samples, probes))


def test_timeout_is_error_and_run_continues(tmp_path):
    (tmp_path / "fake_conformance_ops.py").write_text(_FAKE_OPS)
    proc, report = _run_tool(
        tmp_path, "--extra-ops", "fake_conformance_ops:OPS",
        "--ops", "fake_sleep,fake_ok,fake_crash,fake_raise,fake_segfault", "--dtype", "float32", "--jobs", "1",
        "--timeout", "3", extra_path=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    entries = _by_key(report)
    assert entries[("fake_sleep", "float32")]["status"] == "error"
    assert "timeout" in entries[("fake_sleep", "float32")]["detail"]
    assert entries[("fake_ok", "float32")]["status"] == "pass"
    assert entries[("fake_crash", "float32")]["status"] == "error"
    assert "worker died" in entries[("fake_crash", "float32")]["detail"]
    assert "trace" not in entries[("fake_crash", "float32")]  # it exited; no fault to report
    # A fatal signal in native code: the record holds the Python stack the worker's fault handler wrote.
    segfault = entries[("fake_segfault", "float32")]
    assert segfault["status"] == "error" and "exit code -11" in segfault["detail"]
    assert "Segmentation fault" in segfault["trace"] and "_segfault_in_native_code" in segfault["trace"]
    assert entries[("fake_raise", "float32")]["status"] == "error"


def test_timeout_applies_per_sample(tmp_path):
    # Four samples of 1.2 s each: the entry takes longer than --timeout, but no sample does.
    (tmp_path / "fake_conformance_ops.py").write_text(_FAKE_OPS)
    proc, report = _run_tool(
        tmp_path, "--extra-ops", "fake_conformance_ops:OPS", "--ops", "fake_slow_samples",
        "--dtype", "float32", "--jobs", "1", "--timeout", "3", extra_path=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    entry = _by_key(report)[("fake_slow_samples", "float32")]
    assert entry["status"] == "pass" and entry["samples"] == 4, entry


def test_regressions_reported():
    entries = [{"op": "add", "dtype": "float32", "status": "mismatch", "detail": "x"},
               {"op": "abs", "dtype": "float32", "status": "pass", "detail": ""}]
    baseline = {"add|float32": "pass", "abs|float32": "pass", "sum|float32": "pass"}
    lost = conformance.regressions(entries, baseline)
    assert len(lost) == 1 and lost[0].startswith("add|float32")


def test_check_regressions_exits_nonzero(tmp_path):
    (tmp_path / "fake_conformance_ops.py").write_text(_FAKE_OPS)
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"fake_wrong|float32": "pass", "fake_ok|float32": "pass"}))
    proc, report = _run_tool(
        tmp_path, "--extra-ops", "fake_conformance_ops:OPS", "--ops", "fake_wrong,fake_ok",
        "--dtype", "float32", "--baseline", str(baseline), "--check-regressions",
        extra_path=tmp_path, timeout=300)
    assert proc.returncode == 1
    assert "REGRESSION fake_wrong|float32" in proc.stdout
    assert "fake_ok|float32" not in proc.stdout.split("conformance:")[0]


def test_ci_ops_exist_and_are_enough():
    ops = conformance.all_ops()
    assert len(conformance.CI_OPS) >= 60
    assert [name for name in conformance.CI_OPS if name not in ops] == []


@pytest.mark.skipif(os.environ.get("TORCHNEURON_CONFORMANCE_CI") != "1",
                    reason="set TORCHNEURON_CONFORMANCE_CI=1 to run the CI conformance subset")
@pytest.mark.timeout(1200)  # the tool's own limit is 900 s
def test_ci_subset_has_no_regressions(tmp_path):
    proc, report = _run_tool(tmp_path, "--ci", "--jobs", "2", "--baseline", BASELINE,
                             "--check-regressions", timeout=900)
    assert report is not None, proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
