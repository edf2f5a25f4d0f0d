"""Faults in a neuron group, one per run (argv[1]); the test reads each rank's output.
  killed:   rank 1 dies (SIGKILL) while rank 0 is in an all_reduce.
  stalled:  rank 1 stays alive but stops calling collectives.
  mismatch: the ranks all_reduce tensors of different sizes.
Each surviving rank prints `FAULT <seconds> <message>` for the error it raised, or `NO ERROR`."""

import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

mode = sys.argv[1]
TIMEOUT_S = 6
device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
torch.neuron.set_device(device)
dist.init_process_group("neuron", timeout=timedelta(seconds=TIMEOUT_S))
rank = dist.get_rank()

warm = torch.ones(4, device=device)
dist.all_reduce(warm)  # the group works before the fault
assert warm.cpu().tolist() == [2.0] * 4

if rank == 1 and mode == "killed":
    time.sleep(0.5)     # rank 0 is inside its all_reduce by now
    os.kill(os.getpid(), signal.SIGKILL)
if rank == 1 and mode == "stalled":
    time.sleep(2 * TIMEOUT_S + 2)
    sys.exit(0)

start = time.monotonic()
try:
    size = 1 << 20 if mode != "mismatch" else (1000 if rank == 0 else 1500)
    tensor = torch.ones(size, device=device)
    dist.all_reduce(tensor)
    result = tensor.cpu()  # the synchronization point where a stream-side failure is raised
    print(f"[rank {rank}] NO ERROR (sum of the first element: {result[0].item()})", flush=True)
except Exception as error:  # noqa: BLE001
    message = " ".join(str(error).split())
    print(f"[rank {rank}] FAULT {time.monotonic() - start:.1f} {type(error).__name__}: {message}", flush=True)
    # The device works again once the error was raised.
    probe = torch.arange(3.0, device=device) * 2
    print(f"[rank {rank}] DEVICE OK {probe.cpu().tolist() == [0.0, 2.0, 4.0]}", flush=True)
    os._exit(3)
dist.destroy_process_group()
