"""DistributedDataParallel on neuron against the same DDP run on CPU through Gloo, in one group
("cpu:gloo,neuron:neuron"): a small CNN (BatchNorm buffers broadcast, small buckets), the tiny
GPT, no_sync gradient accumulation, find_unused_parameters and comm hooks."""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from tiny_gpt import TinyGPT  # noqa: E402

from common import check, report, setup  # noqa: E402

rank, world, device = setup("cpu:gloo,neuron:neuron")


def small_cnn():
    # No bias before BatchNorm: its true gradient is zero, and AdamW would amplify rounding noise.
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 3))


class WithUnusedBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(6, 6)
        self.unused = nn.Linear(6, 6)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        return self.head(torch.relu(self.used(x)))


def cnn_step(model, x, y):
    return F.cross_entropy(model(x), y)


def gpt_step(model, tokens):
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def train(make_model, device, batches, loss_fn, steps_per_update=1, hook=None, clip=None, **ddp_options):
    """Trains a DDP copy of make_model() on this rank's batches; returns (losses, parameters)."""
    torch.manual_seed(0)
    model = DDP(make_model().to(device), **ddp_options)
    if hook is not None:
        model.register_comm_hook(None, hook)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step, batch in enumerate(batches):
        batch = [t.to(device) for t in batch]
        last_micro_step = (step + 1) % steps_per_update == 0
        if last_micro_step:
            loss = loss_fn(model, *batch)
            loss.backward()
        else:
            with model.no_sync():
                loss = loss_fn(model, *batch)
                loss.backward()
        losses.append(loss.item())
        if last_micro_step:
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return torch.tensor(losses), [p.detach().cpu() for p in model.parameters()]


def compare(name, *run_args, **run_options):
    """The same training on neuron and on CPU: losses and parameters within float tolerance."""
    neuron_losses, neuron_params = train(run_args[0], device, *run_args[1:], **run_options)
    cpu_losses, cpu_params = train(run_args[0], torch.device("cpu"), *run_args[1:], **run_options)

    def body():
        torch.testing.assert_close(neuron_losses, cpu_losses, rtol=1e-4, atol=1e-5)
        for got, expected in zip(neuron_params, cpu_params):
            # AdamW turns float32 rounding differences of tiny gradients into up to ~1e-4.
            torch.testing.assert_close(got, expected, rtol=1e-3, atol=2e-4)
        first, last = neuron_losses[:2].mean(), neuron_losses[-2:].mean()
        assert last < first, f"did not train: {neuron_losses.tolist()}"

    check(name, body)


g = torch.Generator().manual_seed(10 + rank)  # every rank its own data, two batches seen 4 times
images = [(torch.randn(4, 1, 8, 8, generator=g), torch.randint(0, 3, (4,), generator=g)) for _ in range(2)] * 4
tokens = [(torch.randint(0, 40, (4, 17), generator=g),) for _ in range(2)] * 4
features = [(torch.randn(5, 6, generator=g),) for _ in range(2)] * 3

compare("DDP small CNN, 1 KiB buckets (BatchNorm buffers broadcast)", small_cnn, images, cnn_step,
        bucket_cap_mb=1 / 1024)
compare("DDP tiny GPT, clipped", lambda: TinyGPT(vocab=40, context=16, width=32, heads=4, layers=2, dropout=0.0),
        tokens, gpt_step, clip=1.0)
compare("DDP no_sync (2 micro-steps per update)", small_cnn, images, cnn_step, steps_per_update=2)
compare("DDP find_unused_parameters", WithUnusedBranch, features,
        lambda model, x: model(x).square().mean(), find_unused_parameters=True)
compare("DDP allreduce comm hook (Work.get_future)", small_cnn, images, cnn_step, hook=default_hooks.allreduce_hook)
compare("DDP fp16 compress comm hook", small_cnn, images, cnn_step, hook=default_hooks.fp16_compress_hook)

report()
torch.distributed.destroy_process_group()
