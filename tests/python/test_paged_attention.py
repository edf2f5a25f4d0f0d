"""torch.ops.torchneuron.paged_cache_write / paged_attention (the vLLM backend's ops) against a
dense PyTorch reference on CPU: each sequence's keys gathered from its blocks, masked softmax."""

import math

import pytest
import torch

import torchneuron  # noqa: F401

DEV = "neuron"


def reference_attention(query, key_cache, value_cache, block_table, query_start, seq_lens, scale, window=0,
                        softcap=0.0):
    """Dense attention per sequence in float64 on CPU."""
    tokens, heads, dim = query.shape
    kv_heads, block_size = key_cache.shape[2], key_cache.shape[1]
    out = torch.zeros(tokens, heads, dim, dtype=torch.float64)
    for s in range(len(seq_lens)):
        q0, q1, length = int(query_start[s]), int(query_start[s + 1]), int(seq_lens[s])
        positions = torch.arange(length)
        blocks = block_table[s, positions // block_size].long()
        k = key_cache[blocks, positions % block_size].double()  # [len, kv_heads, dim]
        v = value_cache[blocks, positions % block_size].double()
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        q = query[q0:q1].double()
        scores = torch.einsum("qhd,khd->hqk", q, k) * scale
        if softcap > 0:
            scores = softcap * torch.tanh(scores / softcap)
        q_pos = torch.arange(length - (q1 - q0), length)[:, None]
        visible = positions[None, :] <= q_pos
        if window > 0:
            visible &= positions[None, :] > q_pos - window
        scores = scores.masked_fill(~visible, float("-inf"))
        out[q0:q1] = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)
    return out


def make_batch(query_lens, seq_lens, heads=4, kv_heads=2, dim=16, block_size=4, num_blocks=64, dtype=torch.float32,
               seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = sum(query_lens)
    query = torch.randn(tokens, heads, dim, generator=g).to(dtype)
    key_cache = torch.randn(num_blocks, block_size, kv_heads, dim, generator=g).to(dtype)
    value_cache = torch.randn(num_blocks, block_size, kv_heads, dim, generator=g).to(dtype)
    max_blocks = max(math.ceil(n / block_size) for n in seq_lens)
    # Every sequence gets distinct, shuffled blocks.
    order = torch.randperm(num_blocks, generator=g)[: len(seq_lens) * max_blocks]
    block_table = order.view(len(seq_lens), max_blocks).int()
    query_start = torch.tensor([0] + list(torch.tensor(query_lens).cumsum(0)), dtype=torch.int32)
    return query, key_cache, value_cache, block_table, query_start, torch.tensor(seq_lens, dtype=torch.int32)


def run_device(query, key_cache, value_cache, block_table, query_start, seq_lens, scale, window=0, softcap=0.0):
    out = torch.full(query.shape, 7.0, dtype=query.dtype, device=DEV)
    torch.ops.torchneuron.paged_attention(query.to(DEV), key_cache.to(DEV), value_cache.to(DEV),
                                          block_table.to(DEV), query_start.to(DEV), seq_lens.to(DEV), scale,
                                          window, softcap, out=out)
    return out.cpu()


CASES = {
    "decode": ([1, 1, 1], [5, 17, 1]),
    "prefill": ([6, 9], [6, 9]),
    "chunked_prefill_and_decode": ([4, 1, 7], [11, 30, 7]),
    "long": ([20, 1], [20, 45]),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matches_dense_reference(case, dtype):
    query_lens, seq_lens = CASES[case]
    batch = make_batch(query_lens, seq_lens, dtype=dtype)
    scale = 0.25
    got = run_device(*batch, scale)
    want = reference_attention(*batch, scale)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.double(), want, atol=tol, rtol=tol)


@pytest.mark.parametrize("window,softcap", [(3, 0.0), (0, 1.5), (5, 2.0)])
def test_sliding_window_and_softcap(window, softcap):
    batch = make_batch([4, 1, 8], [9, 13, 8], heads=6, kv_heads=3, dim=24, block_size=5)
    got = run_device(*batch, 0.3, window, softcap)
    want = reference_attention(*batch, 0.3, window, softcap)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)


def test_padding_rows_are_left_alone():
    query, kc, vc, table, starts, lens = make_batch([2, 3], [4, 3])
    padded = torch.cat([query, torch.randn(3, *query.shape[1:])])
    got = run_device(padded, kc, vc, table, starts, lens, 0.5)
    assert torch.equal(got[5:], torch.full((3, *query.shape[1:]), 7.0))
    torch.testing.assert_close(got[:5].double(), reference_attention(query, kc, vc, table, starts, lens, 0.5),
                               atol=1e-5, rtol=1e-5)


def test_cache_write_by_slot_then_attend():
    """Prefill writes keys by slot mapping; attention over the cache equals dense causal attention."""
    torch.manual_seed(0)
    heads, kv_heads, dim, block_size, num_blocks = 4, 2, 8, 4, 16
    lens = [7, 3]
    k = torch.randn(sum(lens), kv_heads, dim)
    v = torch.randn(sum(lens), kv_heads, dim)
    q = torch.randn(sum(lens), heads, dim)
    table = torch.tensor([[5, 2], [9, 0]], dtype=torch.int32)
    slots = []
    for s, n in enumerate(lens):
        slots += [int(table[s, p // block_size]) * block_size + p % block_size for p in range(n)]
    slots = torch.tensor(slots + [-1], dtype=torch.int64)  # a padding token's slot is -1
    kd = torch.cat([k, torch.randn(1, kv_heads, dim)]).to(DEV)
    vd = torch.cat([v, torch.randn(1, kv_heads, dim)]).to(DEV)
    # The cache as vLLM lays it out: [blocks, kv_heads, block_size, 2 * dim] viewed per block row.
    kv = torch.zeros(num_blocks, block_size, kv_heads, 2 * dim, device=DEV).transpose(1, 2)
    key_cache, value_cache = kv.transpose(1, 2).split(dim, dim=-1)
    torch.ops.torchneuron.paged_cache_write(kd, vd, key_cache, value_cache, slots.to(DEV))
    starts = torch.tensor([0, 7, 10], dtype=torch.int32)
    out = torch.empty(sum(lens), heads, dim, device=DEV)
    torch.ops.torchneuron.paged_attention(q.to(DEV), key_cache, value_cache, table.to(DEV), starts.to(DEV),
                                          torch.tensor(lens, dtype=torch.int32, device=DEV), 0.4, out=out)
    for s, (a, b) in enumerate([(0, 7), (7, 10)]):
        qs = q[a:b].transpose(0, 1)
        ks = k[a:b].repeat_interleave(2, dim=1).transpose(0, 1)
        vs = v[a:b].repeat_interleave(2, dim=1).transpose(0, 1)
        want = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=0.4)
        torch.testing.assert_close(out[a:b].cpu(), want.transpose(0, 1), atol=1e-5, rtol=1e-5)
    # The untouched cache rows stay zero (slot -1 wrote nothing).
    written = torch.zeros(num_blocks * block_size, dtype=torch.bool)
    written[slots[:-1]] = True
    assert key_cache.cpu().reshape(-1, kv_heads, dim)[~written].abs().sum() == 0


def test_bad_block_id_is_a_device_error():
    query, kc, vc, table, starts, lens = make_batch([1], [6])
    table[0, 1] = 1000
    with pytest.raises(RuntimeError, match=r"block_table\[0, 1\] = 1000"):
        run_device(query, kc, vc, table, starts, lens, 1.0)
        torch.neuron.synchronize()


def test_bad_slot_is_a_device_error():
    kv = torch.zeros(2, 4, 1, 8, device=DEV)
    rows = torch.ones(1, 1, 8, device=DEV)
    with pytest.raises(RuntimeError, match=r"slot_mapping\[0\] = 8 is past"):
        torch.ops.torchneuron.paged_cache_write(rows, rows, kv, kv.clone(), torch.tensor([8], device=DEV))
        torch.neuron.synchronize()


def test_argument_errors_are_immediate():
    query, kc, vc, table, starts, lens = make_batch([1], [6])
    with pytest.raises(RuntimeError, match="not a multiple"):
        run_device(query[:, :3], kc, vc, table, starts, lens, 1.0)
    with pytest.raises(RuntimeError, match="block_table must be a 2-D Int"):
        run_device(query, kc, vc, table.long(), starts, lens, 1.0)


def test_graph_replay_reads_new_lengths():
    """Captured once, replayed after the batch's lengths and block table change in place."""
    query, kc, vc, table, starts, lens = make_batch([1, 1], [5, 9], num_blocks=32)
    dq, dk, dv, dt, ds, dl = (t.to(DEV) for t in (query, kc, vc, table, starts, lens))
    out = torch.empty_like(dq)
    g = torch.neuron.NeuronGraph()
    torch.neuron.synchronize()
    with torch.neuron.graph(g):
        torch.ops.torchneuron.paged_attention(dq, dk, dv, dt, ds, dl, 0.5, out=out)
    for new_lens in ([6, 10], [11, 2]):
        lens = torch.tensor(new_lens, dtype=torch.int32)
        dl.copy_(lens)
        g.replay()
        torch.testing.assert_close(out.cpu().double(), reference_attention(query, kc, vc, table, starts, lens, 0.5),
                                   atol=1e-5, rtol=1e-5)


def test_compiled_program_calls_the_op():
    """torch.compile traces the op (its Meta kernel) and runs it inside a compiled program."""
    query, kc, vc, table, starts, lens = make_batch([3, 1], [7, 9])

    def attend(q, kc, vc, table, starts, lens):
        out = torch.empty_like(q)
        torch.ops.torchneuron.paged_attention(q * 2, kc, vc, table, starts, lens, 0.5, out=out)
        return out + 1

    args = [t.to(DEV) for t in (query, kc, vc, table, starts, lens)]
    got = torch.compile(attend, backend="neuron", fullgraph=True)(*args)
    want = reference_attention(query * 2, kc, vc, table, starts, lens, 0.5) + 1
    torch.testing.assert_close(got.cpu().double(), want, atol=1e-5, rtol=1e-5)
