"""Serving tests: vLLM on neuron, run by `make test-serve` in the serving environment
(.venv-serve). The engine runs in the test process (no engine subprocess) so that its errors
reach the test, and any CPU fallback is an error."""

import gc
import os

import pytest
import torch

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ["TORCHNEURON_FALLBACK"] = "error"
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.environ.get("TORCHNEURON_SERVE_MODELS", os.path.join(REPO, "build", "serve", "models"))


def model_path(name):
    path = os.path.join(MODELS, name)
    if not os.path.exists(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"{path}: run `make serve-setup` (examples/serve/make_models.py) first")
    return path


def make_llm(name, **kwargs):
    """A vLLM engine on neuron with a small KV cache (the device's memory is the host's); decode
    steps replay captured graphs unless enforce_eager=True is passed."""
    from vllm import LLM

    options = dict(dtype="float32", max_model_len=512, kv_cache_memory_bytes=64 << 20, enforce_eager=False,
                   max_num_seqs=16, max_num_batched_tokens=512, seed=0)
    options.update(kwargs)
    return LLM(model=model_path(name), **options)


def release(llm):
    """Shuts an engine down so that the next test can start one in this process."""
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()
    cleanup_dist_env_and_memory()


@pytest.fixture(scope="module")
def llama():
    llm = make_llm("tiny-llama", enable_prefix_caching=True)
    yield llm
    release(llm)


PROMPTS = ["the quick brown fox", "a", "once upon a time there was a model that learned to",
           "in the beginning " * 10]


def hf_greedy(name, prompts, max_tokens):
    """Greedy continuations by transformers' generate on CPU in float32."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = model_path(name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    results = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        out = model.generate(ids, max_new_tokens=max_tokens, min_new_tokens=max_tokens, do_sample=False)
        results.append(out[0, ids.shape[1]:].tolist())
    return results


VLLM_CPU_SCRIPT = r"""
import json, sys
from vllm import LLM, SamplingParams
def main():
    llm = LLM(model=sys.argv[1], dtype="float32", max_model_len=512, enforce_eager=True, kv_cache_memory_bytes=64 << 20,
              max_num_seqs=16, max_num_batched_tokens=512, seed=0)
    outs = llm.generate(json.loads(sys.argv[2]), SamplingParams(temperature=0.0, max_tokens=int(sys.argv[3]),
                                                                ignore_eos=True), use_tqdm=False)
    print("TOKENS " + json.dumps([list(o.outputs[0].token_ids) for o in outs]), flush=True)
if __name__ == "__main__":
    main()
"""


def vllm_cpu_greedy(name, prompts, max_tokens, tmp_path):
    """Greedy continuations by vLLM's own CPU platform (its attention kernels), in a child process
    with the neuron plugin off."""
    import json
    import subprocess
    import sys

    script = tmp_path / "vllm_cpu.py"
    script.write_text(VLLM_CPU_SCRIPT)
    env = dict(os.environ, TORCHNEURON_VLLM="0")
    run = subprocess.run([sys.executable, str(script), model_path(name), json.dumps(prompts), str(max_tokens)],
                         env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    lines = [line for line in run.stdout.splitlines() if line.startswith("TOKENS ")]
    assert run.returncode == 0 and lines, run.stdout[-2000:] + run.stderr[-4000:]
    return json.loads(lines[-1][len("TOKENS "):])


def generate(llm, prompts, **params):
    """Token ids of each prompt's first completion, and vLLM's outputs."""
    from vllm import SamplingParams

    outs = llm.generate(prompts, SamplingParams(**params), use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs], outs


GREEDY = dict(temperature=0.0, max_tokens=12, ignore_eos=True)
