"""TorchTitan benchmark (not in make test; needs `make titan`'s packages): tokens per second of
the llama3 debug model (varlen attention, sequence 128, 2 sequences per rank) on 1 and 2 ranks,
eager and compiled (backend "neuron"), on neuron; and the same configuration on CPU with Gloo,
which PyTorch cannot run (it has no CPU kernel for aten::_flash_attention_forward), reported as
such. Each figure is the median tokens/s of steps 3-10 that torchtitan logs."""

import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPS = re.compile(r"step:\s+(\d+)\s+loss:\s+[0-9.]+.*?tps:\s+([0-9,]+)")


def run(assets, ranks, device, compiled, steps=10):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", "-m",
               "torchtitan.train", "--module", "llama3", "--config", "llama3_debugmodel_varlen_attn",
               "--hf_assets_path", os.path.join(assets, "tokenizer"), "--dataloader.dataset", "c4_test",
               "--dataloader.dataset-path", os.path.join(assets, "dataset"), "--training.seq-len", "128",
               "--training.local-batch-size", "2", "--training.steps", str(steps), "--validator.no-enable",
               "--checkpoint.no-enable", "--metrics.no-enable-tensorboard", "--dump-folder",
               os.path.join(assets, "outputs")]
    if ranks > 1:
        command += ["--parallelism.data-parallel-shard-degree", str(ranks), "--parallelism.spmd-backend",
                    "partial_dtensor"]
    if compiled:
        command += ["--compile.enable", "--compile.backend", "neuron" if device == "neuron" else "inductor"]
    env = dict(os.environ, TORCHNEURON_NUM_DEVICES="2", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    if device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # torchtitan then picks the CPU and Gloo
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, cwd=assets)
    text = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    rates = {int(s): float(t.replace(",", "")) for s, t in TPS.findall(text)}
    if done.returncode != 0 or not rates:
        reason = next((ln.strip() for ln in reversed(text.splitlines()) if "Error" in ln), "failed")
        return None, reason[:110]
    return statistics.median(v for s, v in rates.items() if s >= 3), ""


def main():
    assets = tempfile.mkdtemp(prefix="bench-titan-")
    subprocess.run([sys.executable, os.path.join(REPO, "examples", "titan", "prepare_assets.py"), assets], check=True,
                   capture_output=True)
    print(f"{'configuration':34s} {'neuron tok/s':>13s} {'CPU tok/s':>10s}  note")
    for ranks in (1, 2):
        for compiled in (False, True):
            name = f"{ranks} rank{'s' if ranks > 1 else ''}, {'compiled' if compiled else 'eager'}"
            neuron, why_n = run(assets, ranks, "neuron", compiled)
            cpu, why_c = run(assets, ranks, "cpu", compiled)
            cells = [f"{neuron:13.0f}" if neuron else f"{'failed':>13s}", f"{cpu:10.0f}" if cpu else f"{'n/a':>10s}"]
            print(f"{name:34s} {cells[0]} {cells[1]}  {why_n or (why_c and 'CPU: ' + why_c)}", flush=True)


if __name__ == "__main__":
    main()
