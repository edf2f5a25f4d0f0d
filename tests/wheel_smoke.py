"""Smoke test of an installed torchneuron wheel: `make test-wheel` runs it in a new virtual
environment (build/wheel-venv) that holds torch, numpy and the wheel, from a directory outside the
source tree. Each check prints PASS or FAIL; the last line is the tally; the exit status is 1 on
any failure.

    build/wheel-venv/bin/python -I tests/wheel_smoke.py
"""

import faulthandler
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
import traceback

CHECK_TIMEOUT_S = 300  # any one in-process check; a hang prints every thread's stack and exits
WORKDIR = tempfile.mkdtemp(prefix="torchneuron-wheel-smoke-")
os.chdir(WORKDIR)  # nothing of the source tree can be imported from here
os.environ["TORCHNEURON_CACHE_DIR"] = os.path.join(WORKDIR, "cache")  # compile for real, not from a cache
os.environ.pop("PYTHONPATH", None)
os.environ.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)

CHECKS = []


def check(fn):
    """Registers a check; they run in the order they are defined."""
    CHECKS.append(fn)
    return fn


def run(command, timeout, env=None):
    """Runs `command` in its own process group from WORKDIR; returns (exit status, output). Past
    `timeout` the whole group (torchrun and its ranks) is killed and the check fails."""
    process = subprocess.Popen(command, cwd=WORKDIR, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise AssertionError(f"{' '.join(command)} ran past {timeout} s; killed its process group:\n{output[-4000:]}")
    return process.returncode, output


def indented(text):
    return textwrap.indent(text.rstrip(), "    ")


@check
def import_torch_autoloads_the_installed_package():
    import torch

    assert "torchneuron" in sys.modules, "import torch did not load torchneuron (torch.backends entry point)"
    import torchneuron

    site = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
    package = os.path.dirname(os.path.realpath(torchneuron.__file__))
    assert os.path.dirname(package) in site, f"torchneuron imported from {package}, not this environment's {site}"
    assert torch.__version__.startswith("2.13.0"), torch.__version__
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.neuron.device_count() >= 1
    return f"torch {torch.__version__}, torchneuron from {package}, {torch.neuron.device_count()} devices"


@check
def package_holds_every_module_and_library():
    import importlib

    import torchneuron
    from torchneuron import _cpu_dispatch

    package = os.path.dirname(torchneuron.__file__)
    for name in ("compiler", "conformance", "sweep", "distributed", "nki", "nki.library", "info", "ops", "check"):
        importlib.import_module(f"torchneuron.{name}")
    libraries = [os.path.join("lib", "libtorchneuron_runtime.so")]
    libraries += [os.path.join("lib", level, "libtorchneuron_kernels.so") for level in _cpu_dispatch.LEVELS]
    for library in libraries:
        assert os.path.isfile(os.path.join(package, library)), f"{library} is missing from {package}"
    extension = [f for f in os.listdir(package) if f.startswith("_C.") and f.endswith(".so")]
    assert len(extension) == 1, f"expected one _C extension module in {package}, found {extension}"
    return f"{extension[0]}, {', '.join(libraries)}"


@check
def installed_from_a_wheel_tagged_for_this_python_and_platform():
    import importlib.metadata
    import json

    distribution = importlib.metadata.distribution("torchneuron")
    direct_url = json.loads(distribution.read_text("direct_url.json") or "{}")
    assert not direct_url.get("dir_info", {}).get("editable"), f"an editable install: {direct_url}"
    wheel = dict(line.split(": ", 1) for line in distribution.read_text("WHEEL").splitlines() if ": " in line)
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    expected = f"{python}-{python}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"
    assert wheel.get("Tag") == expected, f"wheel tag {wheel.get('Tag')!r}, expected {expected!r}"
    assert wheel.get("Root-Is-Purelib") == "false", wheel
    requires = distribution.requires or []
    assert "torch==2.13.0" in requires, requires
    return f"tag {wheel['Tag']}, requires {', '.join(requires)}, {direct_url.get('url', 'no direct URL')}"


@check
def libraries_find_each_other_relative_to_the_package():
    import torchneuron

    assert shutil.which("readelf"), "this check needs readelf (binutils)"
    package = os.path.dirname(torchneuron.__file__)
    shown = []
    for root, _, names in os.walk(package):
        for name in sorted(n for n in names if n.endswith(".so")):
            path = os.path.join(root, name)
            dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
            for line in dynamic.splitlines():
                if "(RPATH)" in line or "(RUNPATH)" in line:
                    entries = line.split("[", 1)[1].rstrip("]").split(":")
                    outside = [e for e in entries if not e.startswith("$ORIGIN")]
                    assert not outside, f"{os.path.relpath(path, package)} searches {outside} (not relative to the package)"
                    shown.append(f"{os.path.relpath(path, package)}: {':'.join(entries)}")
    return "\n" + indented("\n".join(shown))


@check
def device_op_matches_cpu():
    import torch

    torch.manual_seed(0)
    a, b = torch.randn(64, 96), torch.randn(96, 32)
    expected = torch.softmax(a @ b, dim=-1).sum(0)
    result = torch.softmax(a.to("neuron") @ b.to("neuron"), dim=-1).sum(0)
    assert result.device.type == "neuron", result.device
    torch.testing.assert_close(result.cpu(), expected)
    return "softmax(a @ b).sum(0) on neuron:0 == CPU"


@check
def info_tool_runs():
    from torchneuron import _cpu_dispatch

    code, output = run([sys.executable, "-m", "torchneuron.info"], timeout=120)
    assert code == 0, f"python -m torchneuron.info exited {code}:\n{output}"
    assert "torchneuron: 0.1.0" in output, output
    levels = f"cpu levels built: {', '.join(_cpu_dispatch.LEVELS)}"
    assert levels in output, f"expected '{levels}':\n{output}"
    return "python -m torchneuron.info:\n" + indented(output)


@check
def compiled_function_matches_eager_cpu():
    import torch

    def f(x, y):
        return torch.tanh(x) * y + (x * y).sum(-1, keepdim=True)

    torch.manual_seed(0)
    x, y = torch.randn(16, 40), torch.randn(16, 40)
    compiled = torch.compile(f, backend="neuron")
    result = compiled(x.to("neuron"), y.to("neuron"))
    torch.testing.assert_close(result.cpu(), f(x, y))
    artifacts = sum(len(files) for _, _, files in os.walk(os.environ["TORCHNEURON_CACHE_DIR"]))
    assert artifacts, "the compile cache is empty: nothing was compiled"
    return f"torch.compile(backend='neuron') == eager CPU ({artifacts} files compiled into a new cache)"


@check
def nki_kernel_matches_numpy():
    import numpy as np
    import torch

    from torchneuron import nki
    from torchneuron.nki import isa as nisa
    from torchneuron.nki import language as nl

    @nki.jit
    def matmul_bias_relu(lhs_t, rhs, bias):
        """relu(lhs_t.T @ rhs + bias): one 128-row output tile per program, K accumulated in PSUM."""
        k_size, m_size = lhs_t.shape
        _, n_size = rhs.shape
        out = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.shared_hbm)
        m = nl.program_id(0)
        acc = nl.zeros((128, n_size), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(k_size // 128):
            lhs_tile = nl.ndarray((128, 128), dtype=lhs_t.dtype, buffer=nl.sbuf)
            rhs_tile = nl.ndarray((128, n_size), dtype=rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lhs_tile, src=lhs_t[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
            nisa.dma_copy(dst=rhs_tile, src=rhs[k * 128:(k + 1) * 128, 0:n_size])
            nisa.nc_matmul(dst=acc, stationary=lhs_tile, moving=rhs_tile, accumulate=True)
        bias_tile = nl.load(bias[m * 128:(m + 1) * 128, 0:n_size])
        result = nl.maximum(nl.add(acc, bias_tile), 0.0)
        nl.store(out[m * 128:(m + 1) * 128, 0:n_size], value=result)
        return out

    rng = np.random.default_rng(0)
    lhs_t = rng.standard_normal((256, 256), dtype=np.float32)
    rhs = rng.standard_normal((256, 64), dtype=np.float32)
    bias = rng.standard_normal((256, 64), dtype=np.float32)
    expected = np.maximum(lhs_t.T.astype(np.float64) @ rhs + bias, 0.0)
    result = matmul_bias_relu[2](*(torch.from_numpy(a).to("neuron") for a in (lhs_t, rhs, bias)))
    np.testing.assert_allclose(result.cpu().numpy(), expected, rtol=1e-4, atol=1e-4)
    return "relu(lhs_t.T @ rhs + bias), 2 programs, 256 x 256 x 64 float32 == NumPy"


WORKER = '''
import os
import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
torch.neuron.set_device(device)
dist.init_process_group("neuron")
assert dist.get_backend() == "neuron", dist.get_backend()
t = torch.arange(1000, dtype=torch.float32, device=device) * (rank + 1)
dist.all_reduce(t)
expected = torch.arange(1000, dtype=torch.float32) * (world * (world + 1) // 2)
torch.testing.assert_close(t.cpu(), expected, rtol=0, atol=0)
print(f"rank {rank}/{world}: all_reduce on {t.device} == expected sum", flush=True)
dist.destroy_process_group()
'''


@check
def two_rank_all_reduce():
    worker = os.path.join(WORKDIR, "all_reduce_worker.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", worker]
    code, output = run(command, timeout=180,
                       env={"TORCHNEURON_NUM_DEVICES": "2", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    assert code == 0, f"torchrun exited {code}:\n{output[-6000:]}"
    lines = [line for line in output.splitlines() if "== expected sum" in line]
    assert len(lines) == 2, f"expected both ranks to report:\n{output[-6000:]}"
    return "torchrun, 2 ranks, backend 'neuron':\n" + indented("\n".join(sorted(lines)))


def main():
    print(f"== torchneuron wheel smoke test: {sys.executable}, cwd {WORKDIR}", flush=True)
    passed = failed = 0
    for fn in CHECKS:
        name = fn.__name__.replace("_", " ")
        start = time.monotonic()
        faulthandler.dump_traceback_later(CHECK_TIMEOUT_S, exit=True)
        try:
            detail = fn()
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL {name} ({time.monotonic() - start:.1f} s)\n{indented(traceback.format_exc())}", flush=True)
        else:
            passed += 1
            print(f"PASS {name} ({time.monotonic() - start:.1f} s): {detail}", flush=True)
        finally:
            faulthandler.cancel_dump_traceback_later()
    shutil.rmtree(WORKDIR, ignore_errors=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
