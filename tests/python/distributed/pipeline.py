"""Pipeline parallelism (torch.distributed.pipelining) on neuron: a 4-layer MLP split into two
stages, one per rank, trained with ScheduleGPipe and Schedule1F1B against the whole model on one
CPU process (the same micro-batches)."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from common import check, report, setup

rank, world, device = setup("neuron")
assert world == 2, "two stages, two ranks"
MICROBATCHES = 4


def whole_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def loss_fn(output, target):
    return nn.functional.mse_loss(output, target)


g = torch.Generator().manual_seed(3)
batches = [(torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)) for _ in range(3)]

for schedule_class in (ScheduleGPipe, Schedule1F1B):
    reference = whole_model()
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)
    stage_module = nn.Sequential(*list(whole_model())[:4]) if rank == 0 else nn.Sequential(*list(whole_model())[4:])
    stage_module.to(device)
    stage = PipelineStage(stage_module, rank, world, device)
    schedule = schedule_class(stage, n_microbatches=MICROBATCHES, loss_fn=loss_fn)
    optimizer = torch.optim.SGD(stage_module.parameters(), lr=0.05)
    losses, reference_losses = [], []
    for inputs, targets in batches:
        micro_losses = []
        if rank == 0:
            schedule.step(inputs.to(device))
        else:
            schedule.step(target=targets.to(device), losses=micro_losses)
            losses.append(torch.stack(micro_losses).sum().item())
        optimizer.step()
        optimizer.zero_grad()
        # The reference: the same micro-batches; the schedules scale the accumulated gradients by
        # 1 / micro-batches (scale_grads) and report each micro-batch's loss.
        total = sum(loss_fn(reference(x), y) for x, y in zip(inputs.chunk(MICROBATCHES), targets.chunk(MICROBATCHES)))
        (total / MICROBATCHES).backward()
        reference_optimizer.step()
        reference_optimizer.zero_grad()
        reference_losses.append(total.item())

    name = schedule_class.__name__
    if rank == 1:
        check(f"{name}: losses", lambda: torch.testing.assert_close(torch.tensor(losses), torch.tensor(reference_losses),
                                                                    rtol=1e-4, atol=1e-6))
    mine = list(reference)[:4] if rank == 0 else list(reference)[4:]
    expected = [p.detach() for layer in mine for p in layer.parameters()]

    def parameters_match():
        for got, want in zip(stage_module.parameters(), expected):
            torch.testing.assert_close(got.detach().cpu(), want, rtol=1e-4, atol=1e-6)

    check(f"{name}: this stage's parameters after 3 steps", parameters_match)

report()
dist.destroy_process_group()
