"""Process-wide state that must stay bounded in a long run: the launch-site capture's code
objects, the profiler's command trace, and the compiled-artifact cache on disk."""

import gc
import os
import sys
import weakref

import pytest
import torch


def test_launch_site_capture_lets_generated_code_go():
    # Code made at run time (exec, FX recompile, Dynamo) launches ops; the site capture must not
    # keep every such code object alive. More of them than the capture keeps (4,096) are made.
    x = torch.ones(4, device="neuron")
    first = None
    for i in range(5000):
        code = compile(f"y = x + {i}", f"<generated {i}>", "exec")
        if first is None:
            first = weakref.ref(code)
        exec(code, {"x": x})
        del code
    torch.neuron.synchronize()
    gc.collect()
    assert first() is None, "the launch-site capture still holds the first generated code object"


def test_launch_site_still_names_the_line_after_eviction():
    x = torch.ones(4, device="neuron")
    for i in range(4200):  # more code objects than the capture keeps: it lets them all go once
        exec(compile("y = x * 2", f"<filler {i}>", "exec"), {"x": x})
    weight = torch.randn(4, 2, device="neuron")
    bad = torch.tensor([0, 9], device="neuron")
    line = sys._getframe().f_lineno + 1
    torch.index_select(weight, 0, bad)  # index_select's range check is on the device
    with pytest.raises(torch.AcceleratorError, match="index 9 is out of range") as info:
        torch.neuron.synchronize()
    assert f"{os.path.basename(__file__)}:{line}" in str(info.value)


def test_profiler_trace_is_bounded_and_says_what_it_missed(run_python):
    code = (
        "import torch\n"
        "from torch.profiler import profile, ProfilerActivity\n"
        "x = torch.ones(8, device='neuron')\n"
        "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:\n"
        "    for _ in range(40):\n"
        "        x = x + 1\n"
        "    torch.neuron.synchronize()\n"
        "device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]\n"
        "print(len(device))\n"
    )
    result = run_python(code, env={"TORCHNEURON_PROFILER_MAX_COMMANDS": "10"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip().splitlines()[-1]) == 10
    # Kineto stops the session outside Python's warning machinery: the warning goes to stderr.
    assert "30 neuron device commands are missing from the trace" in result.stderr


def test_failed_compile_leaves_nothing_and_clear_cache_empties(tmp_path, monkeypatch):
    from torchneuron import _C, compiler

    monkeypatch.setenv("TORCHNEURON_CACHE_DIR", str(tmp_path))
    directory = compiler.cache_dir()
    with pytest.raises(RuntimeError, match="the system compiler failed"):
        _C._compiler.build_artifact("this is not C++", directory)
    assert os.listdir(directory) == []

    @torch.compile(backend="neuron")
    def f(a):
        return torch.sin(a) * 2 + 1

    a = torch.randn(64)
    torch.testing.assert_close(f(a.to("neuron")).cpu(), torch.sin(a) * 2 + 1)
    assert any(name.endswith(".so") for name in os.listdir(directory))
    compiler.clear_cache()
    assert not os.path.exists(directory)
    torch._dynamo.reset()
