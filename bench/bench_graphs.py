"""Graph capture benchmarks: plain eager vs a graph replay vs torch.compile(backend="neuron")
(default mode, and mode="reduce-overhead"), taking turns in one run and printed as ratios to
plain eager: a 20-op pointwise chain on 4K and on 4M elements, the tiny GPT training step (whole
step, AdamW with capturable=True, captured), a tiny Llama's forward over a fixed 32-token window
(batch 1 and 8, no cache: 32 and 256 rows of work a step) and a tiny Llama decode step (batch 1 and
8: one token a sequence against a static KV cache, transformers' LlamaForCausalLM with StaticCache,
as `generate` runs it), each with the greedy next token written into a static buffer."""

import copy
import os
import sys
import warnings

import torch

import torchneuron

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_adaptive import chain20  # noqa: E402  (the 20-op pointwise chain)
from bench_compile import TinyLlama, gpt_case, interleaved_step_seconds  # noqa: E402

warnings.simplefilter("ignore")


def graphed(fn, *static_inputs):
    """fn captured once with `static_inputs`; returns a replay function. It warms up on the
    capture stream, as with CUDA graphs: autograd runs a parameter's gradient accumulation on the
    stream where its first backward ran."""
    stream = torch.neuron.Stream()
    with torch.neuron.stream(stream):
        for _ in range(2):
            fn(*static_inputs)
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g, stream=stream):
        fn(*static_inputs)
    # The replay keeps fn and the inputs alive: the graph reads their memory, as a CUDA graph does.
    return lambda: (g.replay(), fn, static_inputs)


def four_ways(fn, *inputs):
    compiled = torch.compile(fn, backend="neuron")
    reduced = torch.compile(fn, backend="neuron", mode="reduce-overhead")
    return {"eager": lambda: fn(*inputs), "graphed": graphed(fn, *inputs), "compiled": lambda: compiled(*inputs),
            "reduce-overhead": lambda: reduced(*inputs)}


def chain_cases():
    for label, numel in (("20 pointwise ops, 4K elements", 4096), ("20 pointwise ops, 4M elements", 4 << 20)):
        yield label, four_ways(chain20, torch.randn(numel, device="neuron"), torch.randn(numel, device="neuron"))


def gpt_training_case():
    model, batch, step = gpt_case()
    runs = {}
    for name in ("eager", "graphed", "compiled", "reduce-overhead"):
        m = copy.deepcopy(model).to("neuron")
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, capturable=name == "graphed")
        forward = {"compiled": lambda mod: torch.compile(mod, backend="neuron"),
                   "reduce-overhead": lambda mod: torch.compile(mod, backend="neuron", mode="reduce-overhead")}.get(
            name, lambda mod: mod)(m)
        data = [t.to("neuron") for t in batch]
        run = (lambda f=forward, o=opt, d=data: step(f, o, d))
        runs[name] = graphed(run) if name == "graphed" else run
    return "tiny GPT training step", runs


def window_case(batch):
    torch.manual_seed(0)
    model = TinyLlama().to("neuron").eval()
    window = torch.randint(0, 96, (batch, 32), device="neuron")
    next_token = torch.empty(batch, dtype=torch.long, device="neuron")

    def decode_step(tokens):
        with torch.no_grad():
            next_token.copy_(model(tokens)[:, -1].argmax(-1))

    return f"tiny Llama 32-token window, batch {batch}", four_ways(decode_step, window)


def decode_case(batch, prompt_length=16):
    import transformers

    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=96, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval().to("neuron")
    cache = transformers.StaticCache(config=config, max_cache_len=64)
    prompt = torch.randint(0, 96, (batch, prompt_length), device="neuron")
    with torch.no_grad():  # prefill
        model(input_ids=prompt, past_key_values=cache, cache_position=torch.arange(prompt_length, device="neuron"))
    ids = prompt[:, -1:].clone()
    position = torch.tensor([prompt_length], device="neuron")
    next_ids = torch.empty(batch, 1, dtype=torch.long, device="neuron")

    def decode_step(ids, position):
        with torch.no_grad():
            for layer in cache.layers:  # the cache counts its own length: every step writes the same slot
                layer.cumulative_length.fill_(prompt_length)
            logits = model(input_ids=ids, past_key_values=cache, cache_position=position).logits
            next_ids.copy_(logits[:, -1].argmax(-1, keepdim=True))

    return f"tiny Llama decode step (KV cache), batch {batch}", four_ways(decode_step, ids, position)


def main():
    print(f"torchneuron {torchneuron.cpu_capability()}")
    names = ("graphed", "compiled", "reduce-overhead")
    print(f"{'case':<44}{'eager ms':>10}" + "".join(f"{n:>17}" for n in names))
    cases = list(chain_cases()) + [gpt_training_case(), window_case(1), window_case(8), decode_case(1), decode_case(8)]
    for label, runs in cases:
        for run in runs.values():  # warm up: compile
            for _ in range(3):
                run()
        torch.neuron.synchronize()
        seconds, ratio = interleaved_step_seconds(runs)
        print(f"{label:<44}{seconds['eager'] * 1e3:>10.3f}" + "".join(f"{ratio('eager', n):>16.2f}x" for n in names),
              flush=True)
    print("ratios: plain eager time / time (above 1 is faster than plain eager)")


if __name__ == "__main__":
    main()
