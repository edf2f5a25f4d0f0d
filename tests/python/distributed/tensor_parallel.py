"""DTensor and tensor parallelism on neuron against the same computation on one CPU process:
distribute_tensor, redistribute between Shard / Replicate / Partial, a transformer block under
ColwiseParallel / RowwiseParallel / SequenceParallel, DTensor random ops, and on 4 ranks a 2-D
mesh (FSDP x TP) trained against the unsharded model."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor import rand as dtensor_rand
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)

from common import check, report, setup

rank, world, device = setup("cpu:gloo,neuron:neuron")


def close(got, expected, rtol=1e-4, atol=1e-5):
    torch.testing.assert_close(got.cpu() if isinstance(got, torch.Tensor) else got, expected, rtol=rtol, atol=atol)


class Block(nn.Module):
    """A pre-norm transformer block whose attention works on whatever heads its shard holds."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.head_dim = width // heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.proj = nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.norm1(x)
        batch, seq = h.shape[0], h.shape[1]
        q, k, v = (layer(h).view(batch, seq, -1, self.head_dim).transpose(1, 2) for layer in (self.q, self.k, self.v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, seq, -1))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def block_plan(sequence_parallel):
    """Megatron-style: q/k/v and up column-wise, proj and down row-wise; with sequence parallel the
    norms run on sequence shards and the block's input and output are sharded on the sequence."""
    plan = {name: ColwiseParallel() for name in ("q", "k", "v", "up")}
    plan.update({name: RowwiseParallel() for name in ("proj", "down")})
    if sequence_parallel:
        plan.update({name: ColwiseParallel(input_layouts=Shard(1)) for name in ("q", "k", "v")})
        plan["up"] = ColwiseParallel(input_layouts=Shard(1))
        plan["proj"] = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
        plan["down"] = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
        plan["norm1"] = SequenceParallel()
        plan["norm2"] = SequenceParallel()
    return plan


# ---- distribute_tensor and redistribute ----
mesh = init_device_mesh("neuron", (world,))
full = torch.arange(world * 6 * 5, dtype=torch.float32).reshape(world * 6, 5)
sharded = distribute_tensor(full.to(device), mesh, [Shard(0)])
check("distribute_tensor Shard(0): this rank's rows", lambda: close(sharded.to_local(), full.chunk(world)[rank]))
check("Shard(0) -> Replicate", lambda: close(sharded.redistribute(mesh, [Replicate()]).to_local(), full))
check("Shard(0) -> Shard(1)", lambda: close(sharded.redistribute(mesh, [Shard(1)]).full_tensor(), full))
partial = DTensor.from_local(torch.full((3, 3), float(rank + 1), device=device), mesh, [Partial()])
check("Partial -> Replicate sums", lambda: close(partial.redistribute(mesh, [Replicate()]).to_local(),
                                                 torch.full((3, 3), float(sum(range(1, world + 1))))))
check("Partial -> Shard(0) reduce-scatters", lambda: close(partial.redistribute(mesh, [Shard(0)]).full_tensor(),
                                                           torch.full((3, 3), float(sum(range(1, world + 1))))))
matrix = torch.randn(8, 6, generator=torch.Generator().manual_seed(5))
product = distribute_tensor(matrix.to(device), mesh, [Shard(0)]) @ distribute_tensor(matrix.t().contiguous().to(device), mesh, [Replicate()])
check("DTensor matmul Shard(0) @ Replicate", lambda: close(product.full_tensor(), matrix @ matrix.t()))

# ---- DTensor random ops: each shard its own numbers, the same whole on every run ----
torch.manual_seed(7)
first = dtensor_rand((world * 4, 4), device_mesh=mesh, placements=[Shard(0)]).full_tensor().cpu()
torch.manual_seed(7)
second = dtensor_rand((world * 4, 4), device_mesh=mesh, placements=[Shard(0)]).full_tensor().cpu()
everyone = [None] * world
dist.all_gather_object(everyone, first)


def random_ops_reproducible():
    close(first, second, rtol=0, atol=0)
    for other in everyone:
        close(other, first, rtol=0, atol=0)                  # every rank sees the same whole
    shards = first.chunk(world)
    assert not torch.equal(shards[0], shards[1]), "two shards drew the same numbers"


check("DTensor rand: reproducible across ranks, distinct per shard", random_ops_reproducible)
torch.manual_seed(8)
replicated = dtensor_rand((5, 5), device_mesh=mesh, placements=[Replicate()]).to_local().cpu()
same = [None] * world
dist.all_gather_object(same, replicated)
check("DTensor rand Replicate: identical on every rank", lambda: [close(s, replicated, rtol=0, atol=0) for s in same])

# ---- a transformer block under tensor parallelism, forward and backward ----
x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(9))
for sequence_parallel in (False, True):
    torch.manual_seed(0)
    reference = Block()
    torch.manual_seed(0)
    model = parallelize_module(Block().to(device), mesh, block_plan(sequence_parallel))
    expected = reference(x)
    expected.square().mean().backward()
    inputs = distribute_tensor(x.to(device), mesh, [Shard(1)]) if sequence_parallel else x.to(device)
    out = model(inputs)
    full_out = out.full_tensor() if isinstance(out, DTensor) else out
    full_out.square().mean().backward()
    label = "ColwiseParallel/RowwiseParallel" + (" + SequenceParallel" if sequence_parallel else "")
    check(f"TP block {label}: forward", lambda: close(full_out, expected.detach()))

    def gradients_match():
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            grad = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
            close(grad, q.grad, rtol=1e-3, atol=1e-5)

    check(f"TP block {label}: gradients", gradients_match)

# ---- 2-D: FSDP over TP on 4 ranks, trained against the unsharded model on all the data ----
if world == 4:
    mesh_2d = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
    dp_rank = mesh_2d["dp"].get_local_rank()
    data = torch.randn(2, 4, 8, 32, generator=torch.Generator().manual_seed(11))  # [dp, batch, seq, width]
    torch.manual_seed(0)
    reference = Block()
    torch.manual_seed(0)
    model = parallelize_module(Block().to(device), mesh_2d["tp"], block_plan(False))
    fully_shard(model, mesh=mesh_2d["dp"])
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(data[dp_rank].to(device)).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        # The same step on one process: FSDP averages the two dp groups' gradients.
        reference_loss = sum(reference(data[d]).square().mean() for d in range(2)) / 2
        reference_loss.backward()
        reference_optimizer.step()
        reference_optimizer.zero_grad()

    def two_d_matches():
        for p, q in zip(model.parameters(), reference.parameters()):
            close(p.full_tensor(), q.detach(), rtol=1e-3, atol=1e-5)

    check("2-D mesh FSDP x TP: parameters after 3 SGD steps", two_d_matches)

report()
dist.destroy_process_group()
