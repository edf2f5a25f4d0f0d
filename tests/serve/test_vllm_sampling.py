"""One engine (tiny Llama, prefix caching on) for several requests: prefix-cache hits, seeded
sampling and logprobs, against Hugging Face transformers on CPU."""

import pytest
import torch
from conftest import GREEDY, PROMPTS, generate, hf_greedy, model_path
from transformers import AutoModelForCausalLM, AutoTokenizer


def test_prefix_cache_hit_gives_the_same_tokens(llama):
    shared = "the quick brown fox jumps over the lazy dog " * 4
    prompts = [shared + "and then", shared + "while the cat"]
    first, _ = generate(llama, prompts[:1], **GREEDY)
    second, outs = generate(llama, prompts[1:], **GREEDY)
    assert outs[0].num_cached_tokens >= 16  # at least one block of the shared prefix was reused
    assert first + second == hf_greedy("tiny-llama", prompts, 12)


def test_seeded_sampling_is_reproducible(llama):
    params = dict(temperature=0.9, top_p=0.9, top_k=50, min_p=0.01, presence_penalty=0.3, max_tokens=16,
                  ignore_eos=True)
    a, _ = generate(llama, PROMPTS[:2], seed=7, **params)
    b, _ = generate(llama, PROMPTS[:2], seed=7, **params)
    c, _ = generate(llama, PROMPTS[:2], seed=8, **params)
    assert a == b
    assert a != c
    # top_k=1 samples the argmax: greedy's tokens.
    d, _ = generate(llama, PROMPTS[:2], seed=7, temperature=1.0, top_k=1, max_tokens=12, ignore_eos=True)
    assert d == hf_greedy("tiny-llama", PROMPTS[:2], 12)


def test_logprobs_match_transformers(llama):
    prompt = PROMPTS[2]
    _, outs = generate(llama, [prompt], temperature=0.0, max_tokens=4, ignore_eos=True, logprobs=3)
    path = model_path("tiny-llama")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    tokens = list(outs[0].outputs[0].token_ids)
    full = torch.cat([ids, torch.tensor([tokens])], dim=1)
    with torch.no_grad():
        ref = model(full).logits[0, ids.shape[1] - 1:-1].log_softmax(-1)
    for step, (token, entries) in enumerate(zip(tokens, outs[0].outputs[0].logprobs)):
        assert len(entries) >= 3
        for candidate, entry in entries.items():
            assert entry.logprob == pytest.approx(ref[step, candidate].item(), abs=1e-3)
        assert entries[token].rank == 1
