"""The `neuron` c10d backend under torchrun: each worker script in distributed/ checks its results
against the same run on CPU tensors through Gloo and exits non-zero on any mismatch."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

WORKERS = Path(__file__).parent / "distributed"


def torchrun(script, nproc, *args, timeout=240, env=None):
    """Runs `script` on `nproc` local ranks (rank r on neuron:r); returns (exit code, output).
    The whole process tree is killed past `timeout`, so a hang fails the test instead."""
    environment = {
        **os.environ,
        "TORCHNEURON_NUM_DEVICES": str(max(nproc, 2)),
        "OMP_NUM_THREADS": "1",
        "WORKER_DEADLINE_S": str(timeout - 30),
        "PYTHONWARNINGS": "ignore",
        **(env or {}),
    }
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={nproc}", str(WORKERS / script), *map(str, args)]
    process = subprocess.Popen(command, cwd=WORKERS, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"{script} on {nproc} ranks ran past {timeout} s:\n{output[-6000:]}")
    return process.returncode, output


def run_ok(script, nproc, *args, **kwargs):
    code, output = torchrun(script, nproc, *args, **kwargs)
    assert code == 0, f"{script} on {nproc} ranks failed (exit {code}):\n{output[-8000:]}"
    assert output.count("checks passed, 0 failed") == nproc, output[-8000:]
    return output


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_collective_matches_gloo_on_cpu(nproc):
    run_ok("collectives.py", nproc)


def test_ddp_trains_like_ddp_on_cpu():
    run_ok("ddp.py", 2)


def test_fsdp2_trains_like_fsdp2_on_cpu():
    run_ok("fsdp.py", 2)


@pytest.mark.parametrize("nproc", [2, 4])  # 4 ranks add the 2-D FSDP x TP mesh
def test_dtensor_and_tensor_parallel_match_one_cpu_process(nproc):
    run_ok("tensor_parallel.py", nproc)


def test_pipeline_schedules_match_one_cpu_process():
    run_ok("pipeline.py", 2)
