"""vLLM on neuron in its own processes: tensor parallelism 2 over torchneuron's c10d backend, and
the OpenAI-compatible server on 127.0.0.1 answering completions and chat completions."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

from conftest import PROMPTS, hf_greedy, model_path

TP_SCRIPT = r"""
import json, sys
from vllm import LLM, SamplingParams
def main():
    llm = LLM(model=sys.argv[1], dtype="float32", max_model_len=512, kv_cache_memory_bytes=64 << 20,
              tensor_parallel_size=int(sys.argv[2]), max_num_seqs=16,
              max_num_batched_tokens=512, seed=0)
    prompts = json.loads(sys.argv[3])
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True), use_tqdm=False)
    print("TOKENS " + json.dumps([list(o.outputs[0].token_ids) for o in outs]), flush=True)
if __name__ == "__main__":
    main()
"""


def child_env():
    env = dict(os.environ, TORCHNEURON_FALLBACK="error", TORCHNEURON_NUM_DEVICES="2", OMP_NUM_THREADS="1")
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # the engine in its own process, as users run it
    return env


def test_tensor_parallel_2_equals_transformers(tmp_path):
    script = tmp_path / "tp.py"
    script.write_text(TP_SCRIPT)
    run = subprocess.run([sys.executable, str(script), model_path("tiny-llama"), "2", json.dumps(PROMPTS)],
                         env=child_env(), capture_output=True, text=True, timeout=420, cwd=tmp_path)
    lines = [line for line in run.stdout.splitlines() if line.startswith("TOKENS ")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-6000:]
    assert json.loads(lines[-1][len("TOKENS "):]) == hf_greedy("tiny-llama", PROMPTS, 12)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def test_openai_server_answers_completions_and_chat(tmp_path):
    model = model_path("tiny-llama")
    port = free_port()
    log = open(tmp_path / "server.log", "w+")
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1",
         "--port", str(port), "--max-model-len", "512", "--kv-cache-memory-bytes", str(64 << 20),
         "--dtype", "float32", "--max-num-seqs", "16", "--max-num-batched-tokens", "512"],
        env=child_env(), stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, "server exited:\n" + open(tmp_path / "server.log").read()[-6000:]
            assert time.monotonic() < deadline, "server not ready in 300 s"
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(1)
        prompt = PROMPTS[2]
        completion = post(base + "/v1/completions", {"model": model, "prompt": prompt, "max_tokens": 12,
                                                     "temperature": 0, "ignore_eos": True,
                                                     "return_token_ids": True})
        tokens = completion["choices"][0].get("token_ids")
        assert tokens == hf_greedy("tiny-llama", [prompt], 12)[0]
        chat = post(base + "/v1/chat/completions", {"model": model, "max_tokens": 8, "temperature": 0,
                                                    "messages": [{"role": "user", "content": "hello there"}]})
        assert chat["choices"][0]["message"]["role"] == "assistant"
        assert chat["usage"]["completion_tokens"] >= 1
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
            assert b"vllm:" in r.read()
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
