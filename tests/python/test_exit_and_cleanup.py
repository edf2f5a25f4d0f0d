"""What a process leaves behind when it ends: work queued before exit runs while Python still
works and a fault it hits is reported, and a distributed job whose peer dies during set-up leaves
no shared-memory segment in /dev/shm."""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO_ROOT


def test_work_queued_before_exit_runs_and_its_fault_is_reported(run_python):
    code = textwrap.dedent("""
        import torch
        table = torch.randn(4, 2, device="neuron")
        torch.index_select(table, 0, torch.tensor([0, 9], device="neuron"))  # faults on the device; never synchronized
    """)
    result = run_python(code)
    assert "neuron:0 had a device error pending at exit" in result.stderr, result.stderr
    assert "index 9 is out of range" in result.stderr


def test_work_queued_before_exit_completes(run_python, tmp_path):
    # Saved after exit began: the copy to the host must still see every queued op's result.
    path = tmp_path / "out.pt"
    code = textwrap.dedent(f"""
        import atexit, torch
        x = torch.arange(6.0, device="neuron")
        for _ in range(50):
            x = x * 1.0 + 1.0
        atexit.register(lambda: torch.save(x.cpu(), {str(path)!r}))
    """)
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    import torch

    torch.testing.assert_close(torch.load(path), torch.arange(6.0) + 50)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RANK_SCRIPT = textwrap.dedent("""
    import datetime, os, sys
    import torch, torch.distributed as dist
    import torchneuron.distributed as tnd
    if int(os.environ["RANK"]) == 1:
        # Dies in the neuron backend's set-up after saying it shares rank 0's machine, before it
        # maps the segment rank 0 then creates.
        def die(transport, store, rank, size, timeout, ranks, factory, machine_id):
            store.set(f"neuron_shm/machine/{rank}", machine_id)
            os._exit(3)
        tnd._C._c10d.create_backend = die
    try:
        dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=8))
        dist.all_reduce(torch.ones(4, device="neuron"))
    except Exception as error:
        print("rank 0 error:", type(error).__name__, flush=True)
        sys.exit(2)
""")


@pytest.mark.timeout(180)
def test_peer_dying_during_setup_leaves_no_shared_memory(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2",
           "TORCHNEURON_NUM_DEVICES": "2", "OMP_NUM_THREADS": "1"}
    ranks = [
        subprocess.Popen([sys.executable, str(script)], cwd=REPO_ROOT, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        for r in (0, 1)
    ]
    try:
        outputs = [p.communicate(timeout=120) for p in ranks]
    finally:
        for p in ranks:
            if p.poll() is None:
                os.killpg(p.pid, 9)
    assert ranks[1].returncode == 3, outputs[1][1]
    assert ranks[0].returncode != 0 and "rank 0 error" in outputs[0][0], outputs[0]
    left = [name for name in os.listdir("/dev/shm") if name.startswith(f"torchneuron-{ranks[0].pid}-")]
    assert left == [], f"rank 0 left its segment behind: {left}"
