"""Serving throughput: the same request set through vLLM's own CPU platform (its default: the model
compiled by inductor) and through vLLM on neuron (torchneuron's platform plugin): eager, with
decode graphs (the plugin's default), and with decode graphs and the model compiled by
torchneuron's compiler (TORCHNEURON_VLLM_COMPILE=1), in one run on the same cores; prints time to first token, decode and
overall tokens per second, and each neuron run's ratio to CPU (higher is better).

    .venv-serve/bin/python bench/bench_serve.py [--model DIR] [--requests N] [--output-tokens N] [--repeats N]

Run by `make bench` after `make serve-setup`. Each configuration runs in a fresh process, --repeats
times (3), the configurations taking turns; each figure is the median of those processes."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.join(HERE, "..", "build", "serve", "models", "tiny-llama")

WORKLOAD = r"""
import json, sys, time
from vllm import LLM, SamplingParams

ROUNDS = 5

def main():
    model, requests, output_tokens, eager = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "eager"
    llm = LLM(model=model, dtype="float32", max_model_len=512, kv_cache_memory_bytes=256 << 20, seed=0,
              enforce_eager=eager, max_num_seqs=requests)
    words = "the quick brown fox jumps over the lazy dog and then".split()
    prompts = [" ".join(words[(i + j) % len(words)] for j in range(16 + 8 * (i % 8))) for i in range(requests)]
    first = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
    full = SamplingParams(temperature=0.0, max_tokens=output_tokens, ignore_eos=True)
    llm.generate(prompts[:2], first, use_tqdm=False)  # warm-up
    ttfts, totals = [], []
    for _ in range(ROUNDS):  # the median of several rounds: single runs swing with the machine
        llm.reset_prefix_cache()
        start = time.perf_counter()
        llm.generate(prompts, first, use_tqdm=False)
        ttfts.append(time.perf_counter() - start)
        llm.reset_prefix_cache()
        start = time.perf_counter()
        outs = llm.generate(prompts, full, use_tqdm=False)
        totals.append(time.perf_counter() - start)
    ttft, total = sorted(ttfts)[ROUNDS // 2], sorted(totals)[ROUNDS // 2]
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    print("RESULT " + json.dumps({"ttft_s": ttft, "total_s": total, "output_tokens": tokens,
                                  "decode_tok_s": (tokens - requests) / max(total - ttft, 1e-9),
                                  "overall_tok_s": tokens / total}), flush=True)

if __name__ == "__main__":
    main()
"""


def run(platform, mode, args):
    env = dict(os.environ, TORCHNEURON_VLLM="1" if platform == "neuron" else "0", VLLM_LOGGING_LEVEL="WARNING",
               TORCHNEURON_VLLM_GRAPHS="0" if mode == "eager" else "1",
               TORCHNEURON_VLLM_COMPILE="1" if mode == "compiled" else "0")
    if platform == "neuron":
        env["TORCHNEURON_FALLBACK"] = "error"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", WORKLOAD, args.model, str(args.requests), str(args.output_tokens), mode],
                          env=env, capture_output=True, text=True, timeout=1800, cwd="/tmp")
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        sys.exit(f"{platform} {mode} run failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    result["wall_s"] = time.perf_counter() - start
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="processes per configuration, taking turns")
    args = parser.parse_args()
    print(f"== serving: {args.requests} requests (prompts 16-72 words), {args.output_tokens} output tokens each, median of 5 rounds in a process and of "
          f"{args.repeats} processes taking turns, "
          f"model {os.path.basename(os.path.abspath(args.model))}, float32, eager")
    configs = {"vLLM CPU": ("cpu", "default"), "neuron eager": ("neuron", "eager"),
               "neuron graphs": ("neuron", "default"), "neuron compiled": ("neuron", "compiled")}
    # This machine's speed swings between processes minutes apart: every configuration runs
    # --repeats times, taking turns, and each figure is the median of its runs.
    results = {name: [] for name in configs}
    for repeat in range(args.repeats):
        for name, (platform, mode) in configs.items():
            results[name].append(run(platform, mode, args))
            print(f"  run {repeat + 1}/{args.repeats} {name}: decode {results[name][-1]['decode_tok_s']:.0f} tokens/s",
                  flush=True)
    runs = {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for name, rs in results.items()}
    cpu = runs["vLLM CPU"]
    neuron = [name for name in runs if name != "vLLM CPU"]
    print(f"{'':24}" + "".join(f"{name:>16}" for name in runs) + "".join(f"{name[7:] + '/CPU':>14}" for name in neuron))
    rows = [("time to first token (s)", "ttft_s", False), ("decode tokens/s", "decode_tok_s", True),
            ("overall tokens/s", "overall_tok_s", True)]
    for label, key, higher_is_better in rows:
        ratios = [(runs[n][key] / cpu[key] if higher_is_better else cpu[key] / runs[n][key]) for n in neuron]
        print(f"{label:24}" + "".join(f"{r[key]:16.3f}" for r in runs.values()) +
              "".join(f"{ratio:13.2f}x" for ratio in ratios))
    print("(startup and run, wall, median: " + ", ".join(f"{name} {r['wall_s']:.0f} s" for name, r in runs.items()) +
          "; ratios above 1 favour neuron)")

if __name__ == "__main__":
    main()
