"""Adaptive eager decides that a recorded value is dead from Python reference counts, read under
the GIL: values Python still holds (strongly or weakly) are written, threads recording at once
neither deadlock nor mix results, and an interpreter without a GIL is refused with a message."""

import sys
import threading
import weakref

import pytest
import torch

import torchneuron


@pytest.fixture
def adaptive():
    saved = torchneuron.adaptive_eager_settings()
    torchneuron.set_adaptive_eager_settings(backlog=0, hot_after=1, min_bytes=0)
    torchneuron.reset_adaptive_eager_stats()
    with torchneuron.adaptive_eager():
        yield
    torchneuron.set_adaptive_eager_settings(**saved)


def steps(x):
    a = x * 2.0
    b = a + 1.0
    c = b.sigmoid()
    return a, b, c


def test_values_python_still_holds_are_written(adaptive):
    x = torch.linspace(-3, 3, 50_000)
    with torchneuron.adaptive_eager(False):  # plain eager: adaptive eager's results are bitwise these
        expected = [t.cpu() for t in steps(x.to("neuron"))]
    for got, cpu in zip(expected, steps(x)):
        torch.testing.assert_close(got, cpu)
    checked = 0
    for _ in range(6):  # the structure is planned once, then reused
        torch.neuron._sleep(2000)
        xd = x.to("neuron")
        before = torchneuron.adaptive_eager_stats()["ops_recorded"]
        a, b, c = steps(xd)
        recorded = torchneuron.adaptive_eager_stats()["ops_recorded"] - before
        weak_b = weakref.ref(b)
        del b  # only a weak reference is left: Python can still reach it, so it must be written
        if recorded == 3:  # the region holds b: the weak reference keeps reaching it
            torch.testing.assert_close(weak_b().cpu(), expected[1], rtol=0, atol=0)
            checked += 1
        torch.testing.assert_close(a.cpu(), expected[0], rtol=0, atol=0)
        torch.testing.assert_close(c.cpu(), expected[2], rtol=0, atol=0)
    assert checked >= 1, "no iteration recorded its ops"


def test_threads_recording_at_once_match_cpu(adaptive):
    inputs = [torch.randn(40_000, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    results, errors = {}, []

    def work(i):
        try:
            x = inputs[i].to("neuron")
            for _ in range(20):
                torch.neuron._sleep(200)
                x = (x * 0.5 + 1.0).tanh()
            results[i] = x.cpu()
        except Exception as error:  # reported below; a thread's exception is otherwise lost
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "adaptive eager deadlocked"
    assert not errors, errors
    for i, x in enumerate(inputs):
        for _ in range(20):
            x = (x * 0.5 + 1.0).tanh()
        torch.testing.assert_close(results[i], x)


def test_refused_without_a_gil(monkeypatch):
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    before = torchneuron.is_adaptive_eager_enabled()
    with pytest.raises(RuntimeError, match="adaptive eager needs the GIL"):
        torchneuron.adaptive_eager()
    assert torchneuron.is_adaptive_eager_enabled() == before
    torchneuron.adaptive_eager(False)  # turning it off is always allowed


def test_environment_setting_refused_without_a_gil(run_python):
    code = "import sys\nsys._is_gil_enabled = lambda: False\nimport torch\n"
    result = run_python(code, env={"TORCHNEURON_ADAPTIVE_EAGER": "1"})
    assert result.returncode != 0
    assert "TORCHNEURON_ADAPTIVE_EAGER=1: adaptive eager needs the GIL" in result.stderr
