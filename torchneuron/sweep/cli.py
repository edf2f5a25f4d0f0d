"""Model sweep: every Hugging Face `transformers` architecture, tiny and random, on CPU and `neuron`.

Usage:
    python -m torchneuron.sweep --ci          # 12 models; exits 1 unless all pass every column
    python -m torchneuron.sweep --jobs 2 --timeout 120 --output sweep.json --markdown sweep.md
    python -m torchneuron.sweep --models bert,gpt2 --limit 10
    python -m torchneuron.sweep --resume --output sweep.json   # go on with a stopped run
    python -m torchneuron.sweep --corpus diffusers --jobs 1 --timeout 300   # diffusers' model classes
    python -m torchneuron.sweep --corpus sentence-transformers             # sentence-transformers models

One entry per model type in transformers' auto mappings: the base model class (AutoModel), or the
first task head when a type has no base model. Its config class is built with defaults and then
shrunk by the first strategy of a ladder that works: "tiny" (few layers, hidden size 32, small
vocabulary, 32x32 images; nested sub-configs too; head, rotary and per-layer sizes kept
consistent), "layers" (layer and expert counts only), "default". The model is built on the CPU
with a fixed seed in eval() mode and run on inputs made from what it declares (forward's
signature, main_input_name, the config; a sub-model gets the arguments its parent model calls it
with): that is the CPU reference (`reference`: pass | error | unavailable, when a package such as
timm is missing), a harness result kept apart from the device columns. Then a deep copy is moved
to `neuron` (load), and both run forward on the same inputs (forward) and a backward step from
the sum of the floating outputs (backward). Outputs and parameter gradients are compared with the CPU as the
reference (atol = rtol = 1e-4, float32). `compile` runs torch.compile(backend="neuron") forward
under no_grad; `compile_backward` runs it with autograd and compares the gradients of the same
loss. `pretrained` saves the model (save_pretrained, safetensors), loads it back with
from_pretrained(dir, device_map="neuron", dtype=torch.bfloat16) and compares its forward with the
CPU's bfloat16 load of the same checkpoint (atol = rtol = 1.6e-2). `fallback` lists the ATen ops that fell back to the CPU during the
neuron run (copy, forward, backward), with calls.

Every model runs in a spawned worker (conformance.run_tasks), so a hang (`--timeout` seconds per
model) or a crash is recorded as an error and the run goes on. Column statuses are pass | mismatch
| error | skipped | n/a; every skip carries its reason in `reasons`; a row's status is
reference_error or unavailable when its CPU reference did not run. Nothing is downloaded:
HF_HUB_OFFLINE=1 is set.

Each finished row is also appended to `<output>.rows.jsonl` as it comes, so a run that is stopped
(a time limit, a lost session) keeps what it did: `--resume` reads that file, skips the models
already there and writes the report of all of them.
"""

import argparse
import json
import sys
import time

from torchneuron.conformance.workers import run_tasks

from .models import _set_offline, architectures
from .report import markdown, totals
from .run import ATOL, RTOL, SweepRunner


# 12 fast models across families: text (encoder, decoders, encoder-decoder), vision (ViT,
# convolutional), audio (CTC, speech-to-text), multimodal, MoE, state-space (pure and hybrid).
CI_MODELS = ("bert", "gpt2", "llama", "t5", "vit", "convnext", "wav2vec2", "whisper", "clip",
             "qwen3_moe", "mamba2", "bamba")


def _clock(seconds):
    """Seconds as h:mm:ss, or m:ss under an hour."""
    minutes, sec = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{sec:02d}" if hours else f"{minutes}:{sec:02d}"


def _progress(now=time.monotonic):
    """Returns an on_result callback that prints a progress line to stderr per model: done/total,
    the counts so far, the time elapsed and the ETA (the mean time per model so far, times the
    models left)."""
    tty, counts, start = sys.stderr.isatty(), {}, now()

    def show(row, done, total):
        """Prints one progress line."""
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        width = len(str(total))
        elapsed = now() - start
        eta = elapsed / done * (total - done) if done else 0.0
        line = (f"[{done:>{width}}/{total}] {row['model'][:28]:<28} {row['status']:<8} "
                + " ".join(f"{s}={counts.get(s, 0)}" for s in ("pass", "mismatch", "error",
                                                               "skipped"))
                + f" | elapsed {_clock(elapsed)} ETA {_clock(eta)}")
        sys.stderr.write(("\r" + line + "\x1b[K") if tty else line + "\n")
        sys.stderr.flush()
    return show


def parse_args(argv=None):
    """Parses the command line."""
    p = argparse.ArgumentParser(prog="python -m torchneuron.sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", choices=("transformers", "diffusers", "sentence-transformers"), default="transformers",
                   help="transformers model types, diffusers model classes (diffusers_models.py) or "
                   "sentence-transformers models (sentence.py)")
    p.add_argument("--models", help="comma-separated model types (e.g. bert,gpt2; for diffusers, "
                   "class names such as UNet2DConditionModel)")
    p.add_argument("--ci", action="store_true", help=f"run the CI subset: {','.join(CI_MODELS)}")
    p.add_argument("--limit", type=int, help="run only the first N model types")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per model")
    p.add_argument("--output", default="sweep.json", help="JSON report path")
    p.add_argument("--markdown", default="sweep.md", help="Markdown report path")
    p.add_argument("--skip", default="", help="diffusers corpus: comma-separated device columns "
                   "not to run (e.g. compile,compile_backward), recorded as skipped")
    p.add_argument("--resume", action="store_true",
                   help="keep the rows of <output>.rows.jsonl and run only the models not in it")
    return p.parse_args(argv)


def select(names, wanted=None, limit=None):
    """Returns the model types to run: `wanted` in order (unknown ones kept, they record a skip)."""
    keys = list(wanted) if wanted else list(names)
    return keys[:limit] if limit else keys


def _rows_path(output):
    return output + ".rows.jsonl"


def _finished_rows(path):
    """Rows a previous run appended, by model; a line cut short by a stopped run is dropped."""
    rows = {}
    try:
        with open(path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                rows[row["model"]] = row
    except FileNotFoundError:
        pass
    return rows


def _appending(path, show):
    """on_result that appends each row to `path` (one JSON object per line), then shows it."""
    def on_result(row, done, total):
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
        show(row, done, total)
    return on_result


def _corpus(corpus, skip=()):
    """(library module, {task: class name}, runner) of a corpus."""
    if corpus == "diffusers":
        import diffusers
        from .diffusers_models import model_classes
        from .diffusers_run import DiffusersRunner
        return diffusers, {n: n for n in model_classes()}, DiffusersRunner(skip)
    if corpus == "sentence-transformers":
        import sentence_transformers
        from .sentence import SentenceRunner, cases
        return sentence_transformers, {c: c.split(":")[0] for c in cases()}, SentenceRunner()
    import transformers
    return transformers, architectures(), SweepRunner()


def main(argv=None):
    """Command-line entry point; returns the process exit code."""
    args = parse_args(argv)
    _set_offline()
    library, names, runner = _corpus(args.corpus, [c for c in args.skip.split(",") if c])
    wanted = list(CI_MODELS) if args.ci and args.corpus == "transformers" else []
    wanted += [m.strip() for m in (args.models or "").split(",") if m.strip()]
    models = select(names, wanted, args.limit)
    rows_path = _rows_path(args.output)
    earlier = _finished_rows(rows_path) if args.resume else {}
    with open(rows_path, "w") as f:  # rewritten whole: a line cut short would spoil the next
        f.writelines(json.dumps(row) + "\n" for row in earlier.values())
    if earlier:
        sys.stderr.write(f"sweep: resuming, {sum(m in earlier for m in models)} of {len(models)} "
                         f"models already in {rows_path}\n")
    start = time.monotonic()
    todo = [m for m in models if m not in earlier]
    done = run_tasks(todo, args.jobs, args.timeout, runner=runner,
                     on_result=_appending(rows_path, _progress())) if todo else []
    by_model = {**earlier, **{r["model"]: r for r in done}}
    rows = [by_model[m] for m in models if m in by_model]
    elapsed = time.monotonic() - start  # this run's time only: a resumed run's share is unknown
    sys.stderr.write("\n")
    report = {"totals": totals(rows), "elapsed_s": round(elapsed, 1),
              args.corpus: library.__version__, "tolerance": {"atol": ATOL, "rtol": RTOL},
              "models": rows}
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
    with open(args.markdown, "w") as f:
        f.write(markdown(rows, elapsed, library.__version__, args.corpus))
    t = report["totals"]
    print(f"sweep: {t['models']} models in {elapsed:.1f} s: built={t['built']} "
          f"reference_pass={t['reference_pass']} reference_error={t['reference_error']} "
          f"unavailable={t['unavailable']} loaded={t['loaded']} forward_pass={t['forward_pass']} backward_pass={t['backward_pass']} "
          f"compile_pass={t['compile_pass']} compile_backward_pass={t['compile_backward_pass']} "
          f"pretrained_pass={t['pretrained_pass']} "
          f"graphs_compiled={t['graphs_compiled']} graphs_eager={t['graphs_eager']} "
          f"mismatch={t['mismatch']} error={t['error']} skipped={t['skipped']} "
          f"-> {args.output}, {args.markdown}")
    if args.ci:
        checked = ("forward", "backward", "compile", "compile_backward", "pretrained")
        failing = [f"{r['model']} ({', '.join(c for c in checked if r[c] not in ('pass', 'n/a'))})"
                   for r in rows if any(r[c] not in ("pass", "n/a") for c in checked)]
        failing += [f"{r['model']} ({r['graphs_eager']} graphs given back to run eagerly: "
                    f"{r['reasons'].get('graphs_eager', '')})" for r in rows if r["graphs_eager"]]
        if failing:
            print(f"sweep CI: no longer passing: {'; '.join(failing)}")
            return 1
    return 0
