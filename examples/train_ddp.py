"""Trains the tiny GPT with DistributedDataParallel on `neuron`, one process per device:

    TORCHNEURON_NUM_DEVICES=2 torchrun --standalone --nproc-per-node 2 examples/train_ddp.py

Each rank trains on its own random windows of the corpus; DDP averages the gradients, so every
rank ends with the same weights, which the script checks at the end. See docs/distributed.md."""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo import CONTEXT, load_corpus, make_batches  # noqa: E402
from tiny_gpt import TinyGPT, train_step  # noqa: E402

STEPS = 60


def main():
    """Runs the DDP training on this rank."""
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.neuron.set_device(local_rank)
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()

    data, vocab = load_corpus()
    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    model = DDP(TinyGPT(vocab=vocab, context=CONTEXT, dropout=0.0).to("neuron"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    batches = make_batches(data, STEPS, torch.Generator().manual_seed(100 + rank))  # this rank's data

    for step, batch in enumerate(batches):
        loss = train_step(model, optimizer, batch.to("neuron"))
        if (step + 1) % 20 == 0:
            average = loss.detach().clone()
            dist.all_reduce(average, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step + 1:>3}/{STEPS}  loss averaged over {world} ranks: {average.item():.4f}", flush=True)

    # Every rank holds the same weights: compare a checksum of them across ranks.
    checksum = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum()
    checksums = [torch.zeros_like(checksum) for _ in range(world)]
    dist.all_gather(checksums, checksum)
    if rank == 0:
        spread = (torch.stack(checksums) - checksum).abs().max().item()
        print(f"weights identical on all {world} ranks: {spread == 0.0} (checksum {checksum.item():.6f})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
