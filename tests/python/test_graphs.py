"""Graph capture and replay: torch.accelerator.Graph and torch.neuron.NeuronGraph / graph /
make_graphed_callables against plain eager on neuron and CPU PyTorch; random ops fresh per replay
and reproducible from the seed; memory that stays flat; and what cannot be captured raising at
capture."""

import pytest
import torch

import torchneuron  # noqa: F401


def chain(x):
    """A 20-op pointwise chain."""
    for i in range(10):
        x = torch.sin(x) * (1.0 + 0.1 * i)
        x = x + 0.5
    return x


def test_captured_chain_replays_bitwise_equal_to_eager(no_fallback):
    gen = torch.Generator().manual_seed(0)
    static_x = torch.randn(4096, generator=gen).to("neuron")
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        static_y = chain(static_x)
    assert g.replay is not None
    for seed in range(3):
        x = torch.randn(4096, generator=torch.Generator().manual_seed(seed + 1))
        static_x.copy_(x.to("neuron"))
        g.replay()
        eager = chain(x.to("neuron"))
        assert torch.equal(static_y.cpu(), eager.cpu())
        torch.testing.assert_close(static_y.cpu(), chain(x))  # CPU PyTorch


def test_capture_records_instead_of_running(no_fallback):
    x = torch.zeros(8, device="neuron")
    stream = torch.neuron.Stream()
    g = torch.accelerator.Graph()
    with torch.neuron.stream(stream), g:
        assert torch.neuron.is_current_stream_capturing()
        x += 1
    assert not torch.neuron.is_current_stream_capturing()
    assert torch.equal(x.cpu(), torch.zeros(8))  # nothing ran yet
    g.replay()
    g.replay()
    assert torch.equal(x.cpu(), torch.full((8,), 2.0))


def test_random_ops_are_fresh_per_replay_and_follow_the_seed(no_fallback):
    g = torch.neuron.NeuronGraph()
    static = torch.empty(1000, device="neuron")
    with torch.neuron.graph(g):
        static.copy_(torch.rand(1000, device="neuron") + torch.randn(1000, device="neuron"))
    torch.neuron.manual_seed(123)
    g.replay()
    first = static.cpu()
    g.replay()
    second = static.cpu()
    assert not torch.equal(first, second)
    torch.neuron.manual_seed(123)  # eager from the same seed and offset draws the same numbers
    assert torch.equal((torch.rand(1000, device="neuron") + torch.randn(1000, device="neuron")).cpu(), first)
    assert torch.equal((torch.rand(1000, device="neuron") + torch.randn(1000, device="neuron")).cpu(), second)


@pytest.mark.parametrize("action", ["item", "cpu", "synchronize", "print", "nonzero"])
def test_host_reads_and_syncs_raise_at_capture(action, capsys):
    x = torch.ones(4, device="neuron")
    g = torch.neuron.NeuronGraph()
    with pytest.raises(RuntimeError, match="is capturing a graph"):
        with torch.neuron.graph(g):
            y = x * 2
            if action == "item":
                y.sum().item()
            elif action == "cpu":
                y.cpu()
            elif action == "synchronize":
                torch.neuron.synchronize()
            elif action == "print":
                print(y)
            else:
                torch.nonzero(y)
    assert not torch.neuron.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="capture failed"):
        g.replay()
    assert torch.equal((x * 3).cpu(), torch.full((4,), 3.0))  # the device works on


def test_fault_in_a_replay_names_the_op_and_the_capturing_line():
    x = torch.randn(4, 3, device="neuron")
    index = torch.zeros(2, dtype=torch.long, device="neuron")
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        out = torch.index_select(x, 0, index)  # the capturing line
    torch.neuron.synchronize()
    index.fill_(7)  # out of range for the replay
    g.replay()
    with pytest.raises(Exception, match=r"(?s)index_select.*captured at: .*test_graphs\.py"):
        torch.neuron.synchronize()
    index.fill_(1)
    g.replay()
    assert torch.equal(out.cpu(), x.cpu()[[1, 1]])


def test_memory_stays_flat_over_1000_replays(no_fallback):
    x = torch.randn(256, 256, device="neuron")
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        y = torch.relu(x @ x + 1).sum(0)
    g.replay()
    torch.neuron.synchronize()
    before = torch.neuron.memory_allocated()
    for _ in range(1000):
        g.replay()
    torch.neuron.synchronize()
    assert torch.neuron.memory_allocated() == before
    torch.testing.assert_close(y.cpu(), torch.relu(x.cpu() @ x.cpu() + 1).sum(0), rtol=1e-4, atol=1e-3)


def test_graph_memory_is_private_until_reset():
    g = torch.neuron.NeuronGraph()
    x = torch.ones(1 << 16, device="neuron")
    with torch.neuron.graph(g):
        temp = x * 2  # freed at the end of the block, but its memory stays the graph's
        out = temp + 1
        del temp
    other = torch.full((1 << 16,), 5.0, device="neuron")  # must not take the graph's memory
    g.replay()
    assert torch.equal(other.cpu(), torch.full((1 << 16,), 5.0))
    assert torch.equal(out.cpu(), torch.full((1 << 16,), 3.0))
    pools = {s["segment_pool_id"] for s in torch.neuron.memory._snapshot()["segments"]}
    assert any(p != (0, 0) for p in pools)  # memory snapshots show the graph pool
    g.reset()
    with pytest.raises(RuntimeError, match="before a capture"):
        g.replay()


def test_graphs_share_a_pool_and_dump_their_commands(tmp_path):
    pool = torch.neuron.graph_pool_handle()
    x = torch.arange(6.0, device="neuron")
    g1, g2 = torch.neuron.NeuronGraph(), torch.neuron.NeuronGraph()
    with torch.neuron.graph(g1, pool=pool):
        a = x * 2
    with torch.neuron.graph(g2, pool=pool):
        b = a + x
    assert g1.pool() == g2.pool() == pool
    g1.replay()
    g2.replay()
    assert torch.equal(b.cpu(), torch.arange(6.0) * 3)
    path = tmp_path / "graph.txt"
    g2.debug_dump(str(path))
    text = path.read_text()
    assert "1 commands" in text and "aten::add" in text


def test_make_graphed_callables_trains_an_mlp_as_eager_does(no_fallback):
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    eager_model = __import__("copy").deepcopy(cpu_model).to("neuron")
    graphed_model = __import__("copy").deepcopy(cpu_model).to("neuron")
    sample = torch.randn(8, 16, device="neuron", requires_grad=True)
    graphed_model = torch.neuron.make_graphed_callables(graphed_model, (sample,))
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    graphed_opt = torch.optim.SGD(graphed_model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(step)).to("neuron").requires_grad_()
        x2 = x.detach().clone().requires_grad_()
        for model, opt, inp in ((eager_model, eager_opt, x), (graphed_model, graphed_opt, x2)):
            opt.zero_grad()
            model(inp).pow(2).sum().backward()
            opt.step()
        assert torch.equal(x.grad.cpu(), x2.grad.cpu())
        for p, q in zip(eager_model.parameters(), graphed_model.parameters()):
            assert torch.equal(p.detach().cpu(), q.detach().cpu())


def test_captured_optimizer_step_matches_eager(no_fallback):
    torch.manual_seed(0)
    params = [torch.randn(64, 64, device="neuron", requires_grad=True) for _ in range(3)]
    reference = [p.detach().clone().requires_grad_() for p in params]
    for p, r in zip(params, reference):
        p.grad = torch.randn_like(p)
        r.grad = p.grad.clone()
    opt = torch.optim.Adam(params, lr=0.01, capturable=True, foreach=True)
    ref_opt = torch.optim.Adam(reference, lr=0.01, capturable=True, foreach=True)
    opt.step()  # warm up: state is created outside the graph
    ref_opt.step()
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        opt.step()
    for _ in range(3):
        g.replay()
        ref_opt.step()
    for p, r in zip(params, reference):
        assert torch.equal(p.detach().cpu(), r.detach().cpu())


def test_a_collective_raises_at_capture():
    import torch.distributed as dist

    dist.init_process_group("neuron", rank=0, world_size=1, store=dist.HashStore())
    try:
        t = torch.ones(4, device="neuron")
        g = torch.neuron.NeuronGraph()
        with pytest.raises(RuntimeError, match="collectives cannot be captured"):
            with torch.neuron.graph(g):
                dist.all_reduce(t)
        dist.all_reduce(t)  # outside a capture it runs
        assert torch.equal(t.cpu(), torch.ones(4))
    finally:
        dist.destroy_process_group()


def test_the_profiler_shows_a_replay_with_its_captured_commands_under_it(tmp_path):
    import json

    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(1024, device="neuron")
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        y = (x * 2).relu()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        g.replay()
        y.cpu()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    replay = next(e for e in events if e["name"] == "graph_replay [neuron]")
    inner = [e for e in events if e.get("args", {}).get("in graph replay") == 1]
    assert {e["name"] for e in inner} == {"aten::mul [neuron]", "aten::relu [neuron]"}
    for e in inner:  # inside the replay's span, on its track
        assert replay["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= replay["ts"] + replay["dur"] + 1
        assert e["tid"] == replay["tid"]


def test_graphed_static_cache_decode_generates_the_same_tokens():
    """A tiny Llama's decode step with a static KV cache, captured once and replayed per token,
    gives the tokens of eager greedy generate."""
    transformers = pytest.importorskip("transformers")  # make test installs it
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval().to("neuron")
    prompt = torch.randint(0, 128, (1, 6))
    expected = model.generate(prompt.to("neuron"), max_new_tokens=8, do_sample=False).cpu()
    cache = transformers.StaticCache(config=config, max_cache_len=32)
    with torch.no_grad():
        logits = model(input_ids=prompt.to("neuron"), cache=cache, cache_position=torch.arange(6, device="neuron"),
                       use_cache=True).logits
        ids = logits[:, -1].argmax(-1, keepdim=True)
        position = torch.tensor([6], device="neuron")
        stream = torch.neuron.Stream()
        with torch.neuron.stream(stream):  # warm up on the capture stream (rewrites position 6 only)
            model(input_ids=ids, cache=cache, cache_position=position, use_cache=True)
        g = torch.neuron.NeuronGraph()
        with torch.neuron.graph(g, stream=stream):
            next_ids = model(input_ids=ids, cache=cache, cache_position=position, use_cache=True).logits[:, -1].argmax(
                -1, keepdim=True)
        generated = [ids.cpu()]
        for _ in range(7):
            g.replay()
            ids.copy_(next_ids)
            position.add_(1)
            generated.append(ids.cpu())
    assert torch.equal(torch.cat([prompt] + generated, 1), expected)


def test_capture_under_adaptive_eager_records_the_held_back_ops(no_fallback):
    """Adaptive eager holds ops back while the device is behind: those of the captured region go
    into the graph, not to the queue after the capture ends."""
    gen = torch.Generator().manual_seed(0)
    static_x = torch.randn(1 << 16, generator=gen).to("neuron")
    busy = torch.randn(768, 768, device="neuron")
    settings = torchneuron.adaptive_eager_settings()
    torchneuron.set_adaptive_eager_settings(backlog=0, hot_after=1, min_bytes=0)
    g = torch.neuron.NeuronGraph()
    try:
        with torchneuron.adaptive_eager(True):
            for _ in range(4):
                busy = busy @ busy  # the device is behind when the capture begins
            torchneuron.reset_adaptive_eager_stats()
            g.capture_begin()
            static_y = chain(static_x)
            g.capture_end()
            recorded = torchneuron.adaptive_eager_stats()["ops_recorded"]
    finally:
        torchneuron.set_adaptive_eager_settings(**settings)
    assert recorded > 0  # the region was held back, so the test exercises the flush
    x = torch.randn(1 << 16, generator=gen)
    static_x.copy_(x.to("neuron"))
    g.replay()
    assert torch.equal(static_y.cpu(), chain(x.to("neuron")).cpu())
