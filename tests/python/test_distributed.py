"""The `neuron` c10d backend under torchrun: each worker script in distributed/ checks its results
against the same run on CPU tensors through Gloo and exits non-zero on any mismatch."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
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



def launch_ranks(script, *args, nproc=2, timeout=90):
    """Starts `nproc` ranks as plain processes (env:// rendezvous, no torchrun agent to kill the
    survivors), so each rank's own reaction to a fault can be read. Returns [(exit code, output)]."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(nproc),
            "TORCHNEURON_NUM_DEVICES": str(max(nproc, 2)), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    ranks = [subprocess.Popen([sys.executable, str(WORKERS / script), *args], cwd=WORKERS,
                              env={**base, "RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for r in range(nproc)]
    deadline = time.monotonic() + timeout
    results = []
    for process in ranks:
        try:
            output, _ = process.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in ranks:
                os.killpg(other.pid, signal.SIGKILL)
            pytest.fail(f"{script} {args}: a rank ran past {timeout} s")
        results.append((process.returncode, output))
    return results


def fault_report(output):
    match = re.search(r"FAULT ([0-9.]+) (.*)", output)
    assert match, f"no error was raised:\n{output[-4000:]}"
    assert "DEVICE OK True" in output, f"the device did not recover after the error:\n{output[-4000:]}"
    return float(match.group(1)), match.group(2)


TIMEOUT_S = 6  # the group timeout in faults.py


def test_a_killed_rank_is_an_error_on_the_others_naming_collective_group_and_peer():
    (code, output), _ = launch_ranks("faults.py", "killed")
    seconds, message = fault_report(output)
    assert code != 0 and seconds < TIMEOUT_S + 5, output
    for expected in ("allreduce", "group '0' (rank 0 of 2)", "rank 1 is gone"):
        assert expected in message, message


def test_a_stalled_rank_is_an_error_within_the_group_timeout():
    (code, output), _ = launch_ranks("faults.py", "stalled")
    seconds, message = fault_report(output)
    assert code != 0 and TIMEOUT_S - 1 < seconds < TIMEOUT_S + 5, output
    for expected in ("allreduce", "Timed out", "rank 1 is alive but has launched only 1 collectives"):
        assert expected in message, message


def test_a_mismatched_collective_is_an_error_not_a_wrong_result():
    results = launch_ranks("faults.py", "mismatch")
    for code, output in results:
        assert "NO ERROR" not in output, output
        assert code != 0, output
    # Gloo's transport thread aborts the rank that receives more bytes than it posted for; the
    # other raises.
    assert any("FAULT" in output for _, output in results), results
    assert any("collective mismatch" in output for _, output in results), results


def test_torchrun_exits_non_zero_when_a_rank_dies():
    start = time.monotonic()
    code, output = torchrun("faults.py", 2, "killed", timeout=90)
    assert code != 0, output
    assert time.monotonic() - start < 60, output
