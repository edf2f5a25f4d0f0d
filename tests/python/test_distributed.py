"""The `neuron` c10d backend under torchrun: each worker script in distributed/ checks its results
against the same run on CPU tensors through Gloo and exits non-zero on any mismatch."""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import kill_group, start_in_new_group

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
    process = start_in_new_group(command, cwd=WORKERS, env=environment, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        output, _ = process.communicate()
        pytest.fail(f"{script} on {nproc} ranks ran past {timeout} s:\n{output[-6000:]}")
    return process.returncode, output


# How many checks each rank of a worker runs: (script, ranks) -> count per rank. A worker that
# stops running some of its checks (a loop over an empty list, a check left out) fails the test
# even though every check it did run passed. Counted from the workers as they are (both
# transports run the same checks); a worker that gains or loses checks updates its row.
EXPECTED_CHECKS = {
    ("collectives.py", 2): [146, 143],
    ("collectives.py", 4): [146, 142, 143, 143],
    ("ddp.py", 2): [6, 6],
    ("fsdp.py", 2): [4, 4],
    ("fsdp_float8.py", 2): [3, 3],
    ("tensor_parallel.py", 2): [12, 12],
    ("tensor_parallel.py", 4): [13, 13, 13, 13],
    ("pipeline.py", 2): [2, 4],  # each rank checks its own stages
    ("nki_collectives.py", 2): [26, 26],
}


def check_tallies(output, nproc, expected=None):
    """Asserts one "[rank r] N checks passed, 0 failed" line per rank with N > 0 (and N equal to
    `expected[r]` where known); returns {rank: N}."""
    lines = re.findall(r"\[rank (\d+)\] (\d+) checks passed, (\d+) failed", output)
    tallies = {int(rank): (int(passed), int(failed)) for rank, passed, failed in lines}
    assert len(lines) == nproc and sorted(tallies) == list(range(nproc)), f"not one report per rank:\n{output[-8000:]}"
    for rank, (passed, failed) in tallies.items():
        assert failed == 0 and passed > 0, f"rank {rank}: {passed} passed, {failed} failed:\n{output[-8000:]}"
        if expected is not None:
            assert passed == expected[rank], f"rank {rank} ran {passed} checks, expected {expected[rank]}"
    return {rank: passed for rank, (passed, _) in tallies.items()}


def run_ok(script, nproc, *args, **kwargs):
    code, output = torchrun(script, nproc, *args, **kwargs)
    assert code == 0, f"{script} on {nproc} ranks failed (exit {code}):\n{output[-8000:]}"
    check_tallies(output, nproc, EXPECTED_CHECKS.get((script, nproc)))
    return output


# Inside one machine collectives take the shared-memory transport unless it is turned off; the
# Gloo path must pass the same tests.
TRANSPORTS = {"shared-memory": {}, "gloo": {"TORCHNEURON_SHM_COLLECTIVES": "0"}}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("nproc", [2, 4])
def test_every_collective_matches_gloo_on_cpu(nproc, transport):
    run_ok("collectives.py", nproc, env=TRANSPORTS[transport])


def test_ddp_trains_like_ddp_on_cpu():
    run_ok("ddp.py", 2)


def test_the_ddp_example_runs_and_ends_with_the_same_weights_on_every_rank():
    code, output = torchrun(WORKERS.parent.parent.parent / "examples" / "train_ddp.py", 2, timeout=180)
    assert code == 0, output[-6000:]
    assert "weights identical on all 2 ranks: True" in output, output[-6000:]


def test_fsdp2_trains_like_fsdp2_on_cpu():
    run_ok("fsdp.py", 2)


def test_fsdp2_with_torchao_float8_all_gather_trains_like_cpu():
    run_ok("fsdp_float8.py", 2)


@pytest.mark.parametrize("nproc", [2, 4])  # 4 ranks add the 2-D FSDP x TP mesh
def test_dtensor_and_tensor_parallel_match_one_cpu_process(nproc):
    run_ok("tensor_parallel.py", nproc)


def test_pipeline_schedules_match_one_cpu_process():
    run_ok("pipeline.py", 2)



def launch_ranks(script, *args, nproc=2, timeout=90, env=None):
    """Starts `nproc` ranks as plain processes (env:// rendezvous, no torchrun agent to kill the
    survivors), so each rank's own reaction to a fault can be read. Returns [(exit code, output)]."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(nproc),
            "TORCHNEURON_NUM_DEVICES": str(max(nproc, 2)), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
            **(env or {})}
    ranks = [start_in_new_group([sys.executable, str(WORKERS / script), *args], cwd=WORKERS,
                                env={**base, "RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
             for r in range(nproc)]
    deadline = time.monotonic() + timeout
    results = []
    for process in ranks:
        try:
            output, _ = process.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in ranks:
                kill_group(other)
            pytest.fail(f"{script} {args}: a rank ran past {timeout} s")
        results.append((process.returncode, output))
    return results


def fault_report(output):
    match = re.search(r"FAULT ([0-9.]+) (.*)", output)
    assert match, f"no error was raised:\n{output[-4000:]}"
    assert "DEVICE OK True" in output, f"the device did not recover after the error:\n{output[-4000:]}"
    return float(match.group(1)), match.group(2)


TIMEOUT_S = 6  # the group timeout in faults.py


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_killed_rank_is_an_error_on_the_others_naming_collective_group_and_peer(transport):
    (code, output), _ = launch_ranks("faults.py", "killed", env=TRANSPORTS[transport])
    seconds, message = fault_report(output)
    assert code != 0 and seconds < TIMEOUT_S + 5, output
    for expected in ("allreduce", "group '0' (rank 0 of 2)", "rank 1 is gone"):
        assert expected in message, message


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_stalled_rank_is_an_error_within_the_group_timeout(transport):
    (code, output), _ = launch_ranks("faults.py", "stalled", env=TRANSPORTS[transport])
    seconds, message = fault_report(output)
    assert code != 0 and TIMEOUT_S - 1 < seconds < TIMEOUT_S + 5, output
    for expected in ("allreduce", "Timed out", "rank 1 is alive but has launched only 1 collectives"):
        assert expected in message, message


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_mismatched_collective_is_an_error_not_a_wrong_result(transport):
    results = launch_ranks("faults.py", "mismatch", env=TRANSPORTS[transport])
    for code, output in results:
        assert "NO ERROR" not in output, output
        assert code != 0, output
    if transport == "shared-memory":  # every rank raises, naming both calls
        for _, output in results:
            assert "FAULT" in output and "collective mismatch" in output, output
            assert "allreduce (1000, 0, 0)" in output and "allreduce (1500, 0, 0)" in output, output
    else:  # Gloo's transport thread aborts the rank that receives more than it posted for
        assert any("FAULT" in output for _, output in results), results
        assert any("collective mismatch" in output for _, output in results), results


def test_torchrun_exits_non_zero_when_a_rank_dies():
    start = time.monotonic()
    code, output = torchrun("faults.py", 2, "killed", timeout=90)
    assert code != 0, output
    assert time.monotonic() - start < 60, output


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def two_hosts():
    """Two network namespaces joined by a veth pair: (namespace, address, interface) per host."""
    if os.geteuid() != 0 or shutil.which("ip") is None:  # make test's set-up installs iproute2
        pytest.skip("needs root and iproute2 (`ip`) to make network namespaces")
    tag = os.getpid() % 100000
    hosts = [(f"tn{tag}a", "10.77.0.1", f"tnv{tag}a"), (f"tn{tag}b", "10.77.0.2", f"tnv{tag}b")]
    try:
        for namespace, _, _ in hosts:
            _ip("netns", "add", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("link", "add", hosts[0][2], "type", "veth", "peer", "name", hosts[1][2])
        for namespace, address, interface in hosts:
            _ip("link", "set", interface, "netns", namespace)
            _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", interface)
            _ip("-n", namespace, "link", "set", interface, "up")
        yield hosts
    finally:
        for namespace, _, _ in hosts:
            _ip("netns", "del", namespace, check=False)  # takes its end of the veth pair along


def test_ddp_across_two_hosts_with_torchrun_nnodes_2(two_hosts):
    """torchrun --nnodes 2 with c10d rendezvous on the first host; Gloo's TCP between the hosts
    over the interface GLOO_SOCKET_IFNAME names; DDP checked against DDP on CPU."""
    endpoint = f"{two_hosts[0][1]}:29531"
    nodes = []
    for node_rank, (namespace, address, interface) in enumerate(two_hosts):
        env = {**os.environ, "GLOO_SOCKET_IFNAME": interface, "TORCHNEURON_NUM_DEVICES": "1",
               "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "WORKER_DEADLINE_S": "150"}
        command = ["ip", "netns", "exec", namespace, sys.executable, "-m", "torch.distributed.run",
                   "--nnodes=2", "--nproc-per-node=1", f"--node-rank={node_rank}", "--rdzv-backend=c10d",
                   f"--rdzv-endpoint={endpoint}", "--rdzv-id=neuron-multinode",
                   # Both "hosts" share one hostname, which resolves to 127.0.0.1: each says which
                   # address is its own, and the first serves the rendezvous store.
                   f"--local-addr={address}", f"--rdzv-conf=is_host={'true' if node_rank == 0 else 'false'}",
                   str(WORKERS / "ddp.py")]
        nodes.append(start_in_new_group(command, cwd=WORKERS, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True))
    outputs = []
    for node in nodes:
        try:
            output, _ = node.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for other in nodes:
                kill_group(other)
            pytest.fail("the two-host job ran past 180 s")
        outputs.append(output)
        assert node.returncode == 0, output[-6000:]
    assert sum(output.count("checks passed, 0 failed") for output in outputs) == 2, outputs
