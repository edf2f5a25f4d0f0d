"""Every collective on neuron tensors against the same collective on CPU tensors through Gloo,
in one group made with init_process_group("cpu:gloo,neuron:neuron"). Run under torchrun."""

import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from common import check, equal, raises, report, setup

rank, world, device = setup("cpu:gloo,neuron:neuron", bind_device=True)
R = dist.ReduceOp
FLOATS = (torch.float32, torch.bfloat16, torch.float16)
INTS = (torch.int32, torch.int64, torch.uint8)


def make(shape, dtype, seed, low=-50, high=50):
    """A per-rank input that the reference and the device run share."""
    g = torch.Generator().manual_seed(seed * 101 + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.uint8:
        low = max(low, 0)
    return torch.randint(low, high, shape, generator=g, dtype=dtype)


def on_device(x, non_contiguous=False):
    """`x` on the device; with a transposed layout when asked (same values)."""
    if not non_contiguous or x.dim() < 2:
        return x.to(device)
    return x.t().contiguous().to(device).t()


def compare(name, got, expected):
    check(name, lambda: torch.testing.assert_close(got.cpu(), expected, rtol=2e-2 if expected.dtype in (torch.bfloat16, torch.float16) else 1e-5, atol=1e-2 if expected.dtype in (torch.bfloat16, torch.float16) else 1e-5))


# all_reduce: every dtype and reduce op, odd sizes, non-contiguous.
seed = 0
for dtype in FLOATS + INTS:
    ops = [R.SUM, R.MIN, R.MAX, R.PRODUCT]
    if not dtype.is_floating_point:
        ops += [R.BAND, R.BOR, R.BXOR]
    for op in ops:
        for shape, non_contiguous in (((1,), False), ((1023,), False), ((5, 7), True)):
            seed += 1
            low, high = (1, 3) if op == R.PRODUCT else (-50, 50)
            x = make(shape, dtype, seed, low, high)
            reference = x.clone()
            dist.all_reduce(reference, op=op)
            got = on_device(x, non_contiguous)
            dist.all_reduce(got, op=op)
            compare(f"all_reduce {dtype} {op} {tuple(shape)}{' non-contiguous' if non_contiguous else ''}", got, reference)
for dtype in FLOATS:
    x = make((33,), dtype, 900)
    total = x.clone()
    dist.all_reduce(total)
    got = x.to(device)
    dist.all_reduce(got, op=R.AVG)
    compare(f"all_reduce {dtype} AVG", got, total / world)
    got = x.to(device)
    dist.all_reduce(got, op=dist._make_nccl_premul_sum(0.5))
    scaled = (x * 0.5)
    dist.all_reduce(scaled)
    compare(f"all_reduce {dtype} PREMUL_SUM(0.5)", got, scaled)
check("all_reduce AVG on integers is a clear error",
      lambda: raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32, device=device), op=R.AVG), "AVG"))


# broadcast, reduce
for dtype in (torch.float32, torch.int64):
    x = make((17,), dtype, 1000)
    reference = x.clone()
    dist.broadcast(reference, src=world - 1)
    got = x.to(device)
    dist.broadcast(got, src=world - 1)
    compare(f"broadcast {dtype}", got, reference)
    reference = x.clone()
    dist.reduce(reference, dst=0, op=R.MAX)
    got = x.to(device)
    dist.reduce(got, dst=0, op=R.MAX)
    if rank == 0:
        compare(f"reduce {dtype} MAX", got, reference)

# all_gather (list, into tensor, coalesced), gather, scatter
x = make((3, 5), torch.float32, 1100)
reference = [torch.empty(3, 5) for _ in range(world)]
dist.all_gather(reference, x)
got = [torch.empty(3, 5, device=device) for _ in range(world)]
dist.all_gather(got, on_device(x, non_contiguous=True))
compare("all_gather list", torch.stack([g.cpu() for g in got]), torch.stack(reference))
reference = torch.empty(world * 3, 5)
dist.all_gather_into_tensor(reference, x)
got = torch.empty(world * 3, 5, device=device)
dist.all_gather_into_tensor(got, x.to(device))
compare("all_gather_into_tensor", got, reference)
got_pair = [torch.empty(world * 7, device=device), torch.empty(world * 2, 3, device=device, dtype=torch.bfloat16)]
inputs = [make((7,), torch.float32, 1101), make((2, 3), torch.bfloat16, 1102)]
with dist._coalescing_manager(async_ops=False):
    for out, inp in zip(got_pair, inputs):
        dist.all_gather_into_tensor(out, inp.to(device))
for out, inp in zip(got_pair, inputs):
    reference = torch.empty(out.shape, dtype=out.dtype)
    dist.all_gather_into_tensor(reference, inp)
    compare(f"all_gather_into_tensor coalesced {inp.dtype}", out, reference)
gathered = [torch.empty(4, device=device) for _ in range(world)] if rank == 0 else None
dist.gather(torch.full((4,), float(rank), device=device), gathered, dst=0)
if rank == 0:
    compare("gather", torch.stack([g.cpu() for g in gathered]), torch.arange(world).float()[:, None].expand(world, 4))
pieces = [torch.full((2, 2), float(r * 10), device=device) for r in range(world)] if rank == 0 else None
received = torch.empty(2, 2, device=device)
dist.scatter(received, pieces, src=0)
compare("scatter", received, torch.full((2, 2), float(rank * 10)))

# reduce_scatter (list, tensor, coalesced)
for dtype in (torch.float32, torch.bfloat16, torch.int32):
    x = make((world * 6,), dtype, 1200)
    reference = torch.empty(6, dtype=dtype)
    dist.reduce_scatter_tensor(reference, x)
    got = torch.empty(6, dtype=dtype, device=device)
    dist.reduce_scatter_tensor(got, x.to(device))
    compare(f"reduce_scatter_tensor {dtype}", got, reference)
    reference_list = torch.empty(6, dtype=dtype)
    dist.reduce_scatter(reference_list, list(x.chunk(world)), op=R.MAX)
    got = torch.empty(6, dtype=dtype, device=device)
    dist.reduce_scatter(got, [c.to(device) for c in x.chunk(world)], op=R.MAX)
    compare(f"reduce_scatter list {dtype} MAX", got, reference_list)
x = make((world * 4,), torch.float32, 1300)
got = torch.empty(4, device=device)
dist.reduce_scatter_tensor(got, x.to(device), op=R.AVG)
reference = torch.empty(4)
dist.reduce_scatter_tensor(reference, x)
compare("reduce_scatter_tensor AVG", got, reference / world)
compare("reduce_scatter_tensor AVG leaves its input", x.to(device), x)
outs = [torch.empty(4, device=device), torch.empty(2, device=device)]
ins = [make((world * 4,), torch.float32, 1301), make((world * 2,), torch.float32, 1302)]
with dist._coalescing_manager(async_ops=False):
    for out, inp in zip(outs, ins):
        dist.reduce_scatter_tensor(out, inp.to(device))
for out, inp in zip(outs, ins):
    reference = torch.empty(out.shape)
    dist.reduce_scatter_tensor(reference, inp)
    compare(f"reduce_scatter_tensor coalesced {tuple(out.shape)}", out, reference)

# all_to_all: single (even and uneven splits) and list
x = make((world * 3, 2), torch.float32, 1400)
reference = torch.empty_like(x)
dist.all_to_all_single(reference, x)
got = torch.empty_like(x, device=device)
dist.all_to_all_single(got, x.to(device))
compare("all_to_all_single", got, reference)
in_splits = [r + 1 for r in range(world)]           # rank sends r+1 rows to rank r
out_splits = [rank + 1] * world                      # and receives rank+1 rows from each
x = make((sum(in_splits), 3), torch.float32, 1401)
reference = torch.empty(sum(out_splits), 3)
dist.all_to_all_single(reference, x, out_splits, in_splits)
got = torch.empty(sum(out_splits), 3, device=device)
dist.all_to_all_single(got, x.to(device), out_splits, in_splits)
compare("all_to_all_single uneven splits", got, reference)
inputs = [make((2, 3), torch.int64, 1402 + r) for r in range(world)]  # Gloo needs equal sizes
outputs = [torch.empty(2, 3, dtype=torch.int64) for _ in range(world)]
dist.all_to_all(outputs, inputs)
got = [torch.empty(2, 3, dtype=torch.int64, device=device) for _ in range(world)]
dist.all_to_all(got, [i.to(device) for i in inputs])
compare("all_to_all list", torch.cat([g.cpu() for g in got]), torch.cat(outputs))

# The group's sequence number (which torch 2.13 could not read on this group) agrees on every rank
# while all ranks have run the same collectives (the point-to-point ones below involve some ranks).
sequence_numbers = [None] * world
dist.all_gather_object(sequence_numbers, dist.distributed_c10d._get_default_group()._get_sequence_number_for_group())
check("the group's sequence number agrees on every rank", lambda: equal(len(set(sequence_numbers)), 1))

# point to point: send/recv, isend/irecv, batch_isend_irecv ring
nxt, prv = (rank + 1) % world, (rank - 1) % world
send = make((9,), torch.float32, 1500)
expected = torch.empty(9)
ref_ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, expected, prv)]
for w in dist.batch_isend_irecv(ref_ops):
    w.wait()
received = torch.empty(9, device=device)
ops = [dist.P2POp(dist.isend, send.to(device), nxt), dist.P2POp(dist.irecv, received, prv)]
for w in dist.batch_isend_irecv(ops):
    w.wait()
compare("batch_isend_irecv ring", received, expected)
if rank == 0:
    dist.send(torch.arange(5.0, device=device) + 1, dst=world - 1)
elif rank == world - 1:
    got = torch.zeros(5, device=device)
    dist.recv(got, src=0)
    compare("send / recv", got, torch.arange(5.0) + 1)
received = torch.empty(3, 4, device=device)
requests = [dist.isend(on_device(make((4, 3), torch.float32, 1501), True).t(), nxt),
            dist.irecv(received, prv)]
for request in requests:
    request.wait()
g = torch.Generator().manual_seed(1501 * 101 + prv)
compare("isend non-contiguous / irecv", received, torch.randn((4, 3), generator=g).t())

# barrier, object collectives
dist.barrier()
objects = [{"step": 3, "name": "neuron"}, [1, 2]] if rank == 0 else [None, None]
dist.broadcast_object_list(objects, src=0, device=device)
check("broadcast_object_list", lambda: equal(objects, [{"step": 3, "name": "neuron"}, [1, 2]]))
gathered = [None] * world
dist.all_gather_object(gathered, {"rank": rank})
check("all_gather_object", lambda: equal(gathered, [{"rank": r} for r in range(world)]))


# Work.get_future, async overlapped with compute, queue order
x = make((64,), torch.float32, 1600)
future = dist.all_reduce(x.to(device), async_op=True).get_future().then(lambda f: f.value()[0] * 2)
reference = x.clone()
dist.all_reduce(reference)
compare("Work.get_future().then", future.wait(), reference * 2)
big = make((1 << 18,), torch.float32, 1601)
a = torch.randn(128, 128)
work = dist.all_reduce(big_device := big.to(device), async_op=True)
product = a.to(device) @ a.to(device)
work.wait()
reference = big.clone()
dist.all_reduce(reference)
compare("async all_reduce overlapped with a matmul", big_device, reference)
compare("the matmul beside it", product, a @ a)
ordered = torch.ones(1000, device=device)
ordered.mul_(rank + 2)          # a kernel just before the collective; no synchronization
dist.all_reduce(ordered)
compare("queue order: the collective sees the kernel before it", ordered,
        torch.full((1000,), float(sum(r + 2 for r in range(world)))))

# functional collectives, eager and compiled
x = make((8,), torch.float32, 1700)
reference = x.clone()
dist.all_reduce(reference)
compare("functional all_reduce (eager)", funcol.all_reduce(x.to(device), "sum", dist.group.WORLD).wait(), reference)
gathered_reference = torch.empty(world * 8)
dist.all_gather_into_tensor(gathered_reference, x)


def step(t):
    t = funcol.all_reduce(t * 2, "sum", dist.group.WORLD)
    g = funcol.all_gather_tensor(t.relu(), 0, dist.group.WORLD)
    return t + 1, g


compiled = torch.compile(step, backend="neuron")
summed, gathered = compiled(x.to(device))
compare("functional all_reduce (compiled)", summed, reference * 2 + 1)
twice = (reference * 2).relu()
gathered_twice = torch.empty(world * 8)
dist.all_gather_into_tensor(gathered_twice, twice)
compare("functional all_gather (compiled)", gathered, gathered_twice)

# sub-groups: split_group, then new_group. (Split first: torch's own Gloo split, which splits the
# CPU side of this group, mixes up its rendezvous keys after a new_group on 4 ranks.)
halves = dist.split_group(split_ranks=[list(range(world // 2)), list(range(world // 2, world))])
x = torch.full((2,), float(rank), device=device)
dist.all_reduce(x, group=halves)
mine = [r for r in range(world) if (r < world // 2) == (rank < world // 2)]
compare("split_group", x, torch.full((2,), float(sum(mine))))
evens = dist.new_group([r for r in range(world) if r % 2 == 0], backend="neuron")
if rank % 2 == 0:
    x = torch.full((3,), float(rank + 1), device=device)
    dist.all_reduce(x, group=evens)
    compare("new_group (even ranks)", x, torch.full((3,), float(sum(r + 1 for r in range(world) if r % 2 == 0))))

# destroy_process_group and abort on sub-groups return, and the default group still works. (A
# collective on the destroyed group itself is not an error with Gloo on CPU either.)
for end in (dist.destroy_process_group, dist.distributed_c10d._abort_process_group):
    sub = dist.new_group(list(range(world)), backend="neuron")
    x = torch.ones(2, device=device)
    dist.all_reduce(x, group=sub)
    compare(f"a sub-group before {end.__name__}", x, torch.full((2,), float(world)))
    end(sub)
x = torch.ones(2, device=device)
dist.all_reduce(x)
compare("the default group after a sub-group's destroy and abort", x, torch.full((2,), float(world)))

report()
dist.destroy_process_group()
