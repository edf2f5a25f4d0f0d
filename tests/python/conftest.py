"""Shared fixtures for the torchneuron pytest suite: subprocess runner and per-test device hygiene."""

import os
import subprocess
import sys

import pytest
import torch

import torchneuron

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Environment variables that change the backend's behaviour; subprocesses start without them
# unless a test sets them on purpose.
_BACKEND_ENV = (
    "TORCHNEURON_NUM_DEVICES",
    "TORCHNEURON_HBM_GB",
    "TORCHNEURON_FALLBACK",
    "TORCHNEURON_LAUNCH_BLOCKING",
    "NEURON_LAUNCH_BLOCKING",
    "TORCHNEURON_ADAPTIVE_EAGER",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    "TORCHNEURON_NKI_INTERPRET",
    "TORCHNEURON_NKI_MODULES",
    "TORCHNEURON_NKI_ATTENTION",
)


def pytest_configure(config):
    # Ops that fall back to the CPU warn once per op; that is tested in test_fallback.py and is
    # noise everywhere else (pytest.warns / catch_warnings(record=True) still see them).
    config.addinivalue_line(
        "filterwarnings", "ignore:Operator .* has no native neuron kernel:UserWarning"
    )


def _clean_env(extra):
    env = {k: v for k, v in os.environ.items() if k not in _BACKEND_ENV}
    env.update(extra or {})
    return env


@pytest.fixture
def run_python():
    """Returns run(code, env=None, timeout=60): runs `python -c code` in a fresh process."""

    def run(code, env=None, timeout=60):
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env=_clean_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


@pytest.fixture(autouse=True)
def device_hygiene():
    """Each test starts on neuron:0 with no pending fault, and leaves the backend as it found it."""
    torch.neuron.set_device(0)
    mode = torchneuron.fallback_mode()
    blocking = torchneuron._C._launch_blocking()
    yield
    for index in range(torch.neuron.device_count()):
        torch.neuron.set_stream(torch.neuron.default_stream(index))
    torch.neuron.set_device(0)
    torchneuron.set_fallback_mode(mode)
    torchneuron._C._set_launch_blocking(blocking)
    # A fault left pending by a test must not be blamed on the next one.
    leaked = []
    for index in range(torch.neuron.device_count()):
        try:
            torch.neuron.synchronize(index)
        except torch.AcceleratorError as error:
            leaked.append(f"neuron:{index}: {error}")
    assert not leaked, "test left a pending device fault: " + "; ".join(leaked)


@pytest.fixture
def no_fallback():
    """Asserts that the test ran every operator natively: the fallback report stays empty."""
    torchneuron.reset_fallback_report()
    yield
    assert torchneuron.fallback_report() == {}


@pytest.fixture
def fresh_compiler(tmp_path, monkeypatch):
    """Each test compiles into its own cache directory with fresh Dynamo state and counters."""
    monkeypatch.setenv("TORCHNEURON_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    torchneuron.reset_compile_stats()
    yield
    torch._dynamo.reset()


@pytest.fixture(params=["compiled", "interpret"])
def nki_mode(request, monkeypatch):
    """Runs the test once with NKI kernels compiled and once interpreted (TORCHNEURON_NKI_INTERPRET)."""
    monkeypatch.setenv("TORCHNEURON_NKI_INTERPRET", "1" if request.param == "interpret" else "0")
    return request.param
