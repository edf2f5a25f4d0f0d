"""vLLM on neuron against Hugging Face transformers on CPU: greedy tokens of four architectures and
chunked prefill, each on an engine of its own: compiled (TORCHNEURON_VLLM_COMPILE=1) with decode
graphs, decode graphs alone (the default) and eager."""

import pytest
from conftest import GREEDY, PROMPTS, generate, hf_greedy, make_llm, release, vllm_cpu_greedy


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen2", "tiny-gpt2"])
def test_greedy_equals_transformers(name, monkeypatch):
    """Llama (GQA), Qwen2 (one kv head, biases) and GPT-2: a batch of prompts of several lengths,
    the model compiled by vLLM with torchneuron's compiler (split at attention), decode steps
    replaying captured graphs of the compiled pieces."""
    import torchneuron.compiler
    from vllm.compilation.counter import compilation_counter

    monkeypatch.setenv("TORCHNEURON_VLLM_COMPILE", "1")
    torchneuron.compiler.reset_compile_stats()
    captured = compilation_counter.num_cudagraph_captured
    llm = make_llm(name)
    try:
        assert compilation_counter.num_cudagraph_captured > captured  # one graph per decode batch size
        stats = torchneuron.compiler.compile_stats()
        # A piece before the first attention, one between the two layers, one after the last.
        assert stats["graphs_compiled"] + stats["graph_cache_hits"] >= 3, stats
        assert stats["graphs_eager"] == 0, stats
        got, _ = generate(llm, PROMPTS, **GREEDY)
    finally:
        release(llm)
    assert got == hf_greedy(name, PROMPTS, 12)


def test_gemma2_equals_vllm_cpu(tmp_path):
    """Gemma-2 (sliding window 16, attention logit soft-capping 5, prompts longer than the window)
    against vLLM's CPU platform: vLLM's Gemma-2 and transformers' part at near-tied logits on this
    tiny model, on the CPU platform as on neuron, so the reference is vLLM's CPU attention."""
    llm = make_llm("tiny-gemma2")
    try:
        got, _ = generate(llm, PROMPTS, **GREEDY)
    finally:
        release(llm)
    assert got == vllm_cpu_greedy("tiny-gemma2", PROMPTS, 12, tmp_path)


def test_eager_engine_equals_transformers(monkeypatch):
    """TORCHNEURON_VLLM_GRAPHS=0: nothing compiled, no graph captured, every step runs eagerly."""
    import torchneuron.compiler
    from vllm.compilation.counter import compilation_counter

    monkeypatch.setenv("TORCHNEURON_VLLM_GRAPHS", "0")
    torchneuron.compiler.reset_compile_stats()
    captured = compilation_counter.num_cudagraph_captured
    llm = make_llm("tiny-llama")
    try:
        assert compilation_counter.num_cudagraph_captured == captured
        stats = torchneuron.compiler.compile_stats()
        assert stats["graphs_compiled"] + stats["graph_cache_hits"] == 0, stats
        got, _ = generate(llm, PROMPTS, **GREEDY)
    finally:
        release(llm)
    assert got == hf_greedy("tiny-llama", PROMPTS, 12)


def test_chunked_prefill_gives_the_same_tokens():
    """A 16-token budget per step splits the long prompts' prefill into chunks, mixed with
    another request's decode steps."""
    prompts = ["in the beginning " * 12, "a", "the quick brown fox " * 6]
    llm = make_llm("tiny-llama", max_num_batched_tokens=16, max_num_seqs=4, enable_chunked_prefill=True)
    try:
        got, _ = generate(llm, prompts, **GREEDY)
    finally:
        release(llm)
    assert got == hf_greedy("tiny-llama", prompts, 12)
