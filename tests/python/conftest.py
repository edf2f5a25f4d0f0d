"""Shared fixtures for the torchneuron pytest suite: subprocess runner and per-test device hygiene,
a per-test timeout that dumps every thread's stack, and the check that no test was skipped
unexpectedly (TORCHNEURON_NO_UNEXPECTED_SKIPS=1, set by `make test`)."""

import faulthandler
import os
import signal
import subprocess
import sys
import threading

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


# A test that runs longer than this (seconds) is a hang: every thread's stack is dumped and the
# run stops. TORCHNEURON_TEST_TIMEOUT_S changes the default; @pytest.mark.timeout(s) raises it
# for one test.
DEFAULT_TEST_TIMEOUT_S = 900

# Skips that depend on the machine or on how the suite is invoked, and so are allowed when
# TORCHNEURON_NO_UNEXPECTED_SKIPS=1: a substring of the skip's reason -> why it is legitimate.
# Every other skip fails the run, because CI is expected to run that test.
ALLOWED_SKIPS = {
    "ATen's level is forced": "make test-levels forces ATEN_CPU_CAPABILITY; make test-python runs "
                              "the test with ATen's own level",
    "this CPU has one level only": "a CPU without AVX2 has no lower level to compare with",
}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "timeout(seconds): raise the per-test timeout (default "
        f"{DEFAULT_TEST_TIMEOUT_S} s) for a test that is slow by design"
    )
    # Ops that fall back to the CPU warn once per op; that is tested in test_fallback.py and is
    # noise everywhere else (pytest.warns / catch_warnings(record=True) still see them).
    config.addinivalue_line(
        "filterwarnings", "ignore:Operator .* has no native neuron kernel:UserWarning"
    )


def _test_timeout_s(item):
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        return float(marker.args[0])
    return float(os.environ.get("TORCHNEURON_TEST_TIMEOUT_S", DEFAULT_TEST_TIMEOUT_S))


_REAL_STDERR = []


def _real_stderr(config):
    """A file on the terminal's stderr, past pytest's output capture (which a dying run loses)."""
    if not _REAL_STDERR:
        fd = None
        try:  # pytest keeps the captured descriptor's original; there is no public accessor
            fd = config.pluginmanager.getplugin("capturemanager")._global_capturing.err.targetfd_save
        except AttributeError:
            pass
        _REAL_STDERR.append(os.fdopen(os.dup(fd if fd is not None else sys.__stderr__.fileno()), "w"))
    return _REAL_STDERR[0]


# Subprocesses started by start_in_new_group() during the current test.
_STARTED = []


def _time_out(nodeid, timeout, stream):
    """Past a test's timeout: every thread's stack, the test's subprocess groups killed, the run
    stopped."""
    stream.write(f"\n{nodeid} ran past its {timeout:g} s timeout; every thread's stack follows.\n")
    stream.flush()
    faulthandler.dump_traceback(file=stream, all_threads=True)
    for process in list(_STARTED):
        kill_group(process)
    stream.flush()
    os._exit(1)


def pytest_unconfigure(config):
    while _REAL_STDERR:
        _REAL_STDERR.pop().close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Arms a timer over the test's set-up, call and tear-down: past the timeout every thread's
    Python stack is printed, the test's subprocess groups are killed and the run exits (a deadlock
    fails instead of hanging). faulthandler's own timer, which needs no GIL, backs it up 30 s
    later for a deadlock that holds the GIL."""
    timeout = _test_timeout_s(item)
    timer = None
    if timeout > 0:
        stream = _real_stderr(item.config)
        timer = threading.Timer(timeout, _time_out, (item.nodeid, timeout, stream))
        timer.daemon = True
        timer.start()
        faulthandler.dump_traceback_later(timeout + 30, exit=True, file=stream)
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
            faulthandler.cancel_dump_traceback_later()
        for process in _STARTED:  # a subprocess a test left running goes with its test
            if process.poll() is None:
                kill_group(process)
        _STARTED.clear()


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPS.append((report.nodeid, reason))


_SKIPS = []


def _unexpected_skips():
    return [(nodeid, reason) for nodeid, reason in _SKIPS
            if not any(allowed in reason for allowed in ALLOWED_SKIPS)]


def pytest_terminal_summary(terminalreporter):
    if os.environ.get("TORCHNEURON_NO_UNEXPECTED_SKIPS") != "1":
        return
    unexpected = _unexpected_skips()
    if unexpected:
        terminalreporter.section("unexpected skips (TORCHNEURON_NO_UNEXPECTED_SKIPS=1)", red=True)
        for nodeid, reason in unexpected:
            terminalreporter.write_line(f"{nodeid}: {reason}")
        terminalreporter.write_line(
            "CI is expected to run these tests: install what they need, or add a machine-dependent "
            "reason to ALLOWED_SKIPS in tests/python/conftest.py")


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("TORCHNEURON_NO_UNEXPECTED_SKIPS") == "1" and _unexpected_skips():
        if session.exitstatus == 0:
            session.exitstatus = 1


def _clean_env(extra):
    env = {k: v for k, v in os.environ.items() if k not in _BACKEND_ENV}
    env.update(extra or {})
    return env


def start_in_new_group(command, **kwargs):
    """subprocess.Popen in a new session (its own process group, which kill_group() ends with
    every child in it); the per-test timeout kills it too."""
    process = subprocess.Popen(command, start_new_session=True, **kwargs)
    _STARTED.append(process)
    return process


def run_in_new_group(command, timeout, **kwargs):
    """subprocess.run(command, timeout=...) in a new session: past the timeout the whole process
    group is killed (its children too), then TimeoutExpired is raised as subprocess.run does."""
    capture = kwargs.pop("capture_output", False)
    if capture:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
    with start_in_new_group(command, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(process)
            stdout, stderr = process.communicate()
            raise subprocess.TimeoutExpired(command, timeout, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def kill_group(process):
    """SIGKILLs the process group that `process` leads (started with start_new_session=True)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture
def run_python():
    """Returns run(code, env=None, timeout=60): runs `python -c code` in a fresh process group,
    killed whole past the timeout."""

    def run(code, env=None, timeout=60):
        return run_in_new_group(
            [sys.executable, "-c", code],
            timeout,
            cwd=REPO_ROOT,
            env=_clean_env(env),
            capture_output=True,
            text=True,
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
