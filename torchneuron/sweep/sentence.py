"""The model sweep's sentence-transformers corpus: `python -m torchneuron.sweep --corpus
sentence-transformers` (the sweep's report), or `python -m torchneuron.sweep.sentence` (a table of
the cases with their fallbacks).

Each case is a sentence-transformers model as its users build them, tiny and random, with a
WordPiece tokenizer trained here (nothing is downloaded): bi-encoders (`SentenceTransformer`) on
the encoder backbones embedding checkpoints use, with every pooling mode and with Dense / LayerNorm
/ Normalize heads; decoder backbones pooled at the last token (as Qwen3-Embedding-style models
pool); cross-encoders (`CrossEncoder`, a one-label classification head); SPLADE sparse encoders
(`SparseEncoder`: a masked-LM head, max pooling); and a static-embedding model. Each runs on the
CPU (the reference) and on neuron, with the transformers sweep's columns: forward (`encode` /
`predict`), backward (every parameter's gradient of the output sum), compile (the module chain
under torch.compile(backend="neuron")), and pretrained (the model saved, loaded back on neuron in
bfloat16 and compared with the CPU's bfloat16 load). Rows are the transformers sweep's."""

import argparse
import copy
import json
import os
import sys
import tempfile
import time

from .cli import _progress
from .models import _seed, _set_offline
from .pretrained import compare_bf16
from .run import (COLUMNS, RANK, SweepRunner, _backward, _counting_graphs, _record, _set, compare_tensors,
                  float_outputs)
from .reference import first_line

SENTENCES = ["the quick brown fox jumps over the lazy dog", "a model learns to embed sentences",
             "vectors", "sentences into vectors over the lazy dog and the quick fox"]
PAIRS = [[SENTENCES[0], SENTENCES[1]], [SENTENCES[2], SENTENCES[3]], [SENTENCES[1], SENTENCES[2]]]

# Backbones of public embedding checkpoints (BERT / RoBERTa / XLM-R / MPNet / DistilBERT /
# DeBERTa-v2 / ELECTRA / ALBERT / ModernBERT / T5 encoders; Qwen3, Qwen2, Mistral, Llama and
# Gemma-3 decoders).
ENCODERS = ("bert", "roberta", "xlm-roberta", "mpnet", "distilbert", "deberta-v2", "electra", "albert",
            "modernbert", "t5")
DECODERS = ("qwen3", "qwen2", "mistral", "llama", "gemma3_text")
POOLING_MODES = ("cls", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken", "mean+max")
CROSS = ("bert", "roberta", "modernbert", "electra")
SPARSE = ("bert", "distilbert")


def cases():
    """Every case name, `kind:backbone[:variant]`."""
    names = [f"bi:{b}:mean" for b in ENCODERS] + [f"bi:{b}:lasttoken" for b in DECODERS]
    names += [f"bi:bert:{mode}" for mode in POOLING_MODES] + ["bi:bert:dense+layernorm+normalize"]
    names += [f"cross:{b}" for b in CROSS] + [f"sparse:{b}" for b in SPARSE] + ["static"]
    return names


def tokenizer():
    """A WordPiece tokenizer trained on the sentences above, with BERT's special tokens."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES * 4, trainers.WordPieceTrainer(vocab_size=96, special_tokens=special))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", bos_token="[CLS]", eos_token="[SEP]")


def _backbone(model_type, head, tok, path):
    """Saves a tiny random `model_type` with `head` ('base', 'classifier', 'mlm') and `tok` in path."""
    import transformers
    from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

    from .shrink import tiny_config

    config = tiny_config(transformers.CONFIG_MAPPING[model_type])
    config.vocab_size = len(tok)
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
                 "cls_token_id"):
        if hasattr(config, name):
            token = {"pad_token_id": tok.pad_token_id, "bos_token_id": tok.cls_token_id,
                     "cls_token_id": tok.cls_token_id}.get(name, tok.sep_token_id)
            setattr(config, name, token)
    if head == "classifier":
        config.num_labels = 1
    auto = {"base": AutoModel, "classifier": AutoModelForSequenceClassification, "mlm": AutoModelForMaskedLM}[head]
    _seed()
    auto.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)


def build(case, workdir):
    """The CPU model of a case (eval mode), built from tiny random weights saved in workdir."""
    from sentence_transformers import CrossEncoder, SentenceTransformer, SparseEncoder
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import LayerNorm, Pooling, StaticEmbedding
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    kind, _, rest = case.partition(":")
    backbone, _, variant = rest.partition(":")
    tok = tokenizer()
    path = os.path.join(workdir, "backbone")
    _seed()
    if kind == "static":
        return SentenceTransformer(modules=[StaticEmbedding(tok, embedding_dim=32)], device="cpu")
    if kind == "cross":
        _backbone(backbone, "classifier", tok, path)
        return CrossEncoder(path, device="cpu")
    if kind == "sparse":
        _backbone(backbone, "mlm", tok, path)
        return SparseEncoder(modules=[MLMTransformer(path), SpladePooling("max")], device="cpu")
    _backbone(backbone, "base", tok, path)
    transformer = Transformer(path)
    width = transformer.get_embedding_dimension()
    if variant == "dense+layernorm+normalize":
        modules = [transformer, Pooling(width, "mean"), Dense(width, 16), LayerNorm(16), Normalize()]
    else:
        modules = [transformer, Pooling(width, tuple(variant.split("+")))]
    return SentenceTransformer(modules=modules, device="cpu")


def _encode(model, case):
    """The model's output for the corpus inputs, as a dense CPU float tensor (no grad)."""
    import torch
    _seed()
    with torch.no_grad():
        if case.startswith("cross:"):
            out = model.predict(PAIRS, convert_to_tensor=True, batch_size=len(PAIRS))
        else:
            out = model.encode(SENTENCES, convert_to_tensor=True, batch_size=len(SENTENCES))
    out = out.to_dense() if out.is_sparse else out
    return {"embedding": out.float().cpu()}


def _features(model, case, device):
    """The tokenized corpus inputs, as the model's forward takes them, on `device`."""
    import torch
    texts = PAIRS if case.startswith("cross:") else SENTENCES
    features = model.preprocess(texts)
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}


def _outputs(model, case, device):
    """The floating outputs of the model's forward on the tokenized inputs (with autograd)."""
    _seed()
    return float_outputs({k: v for k, v in model(_features(model, case, device)).items()
                          if k not in ("token_embeddings", "all_layer_embeddings")})


def _grads(model, outputs):
    grads = _backward(model, outputs)
    return None if grads is None else {n: g.cpu() for n, g in grads.items()}


def _pretrained(cpu_model, case, workdir, expected, row):
    """Saves the CPU model, loads it back on neuron and on the CPU in bfloat16, compares encode
    (pretrained.compare_bf16's rule, with the float32 model's output `expected`)."""
    import torch
    from sentence_transformers import CrossEncoder, SentenceTransformer, SparseEncoder

    saved = os.path.join(workdir, "saved")
    cpu_model.save(saved)
    cls = {"cross": CrossEncoder, "sparse": SparseEncoder}.get(case.split(":")[0], SentenceTransformer)
    kwargs = {} if case == "static" else {"model_kwargs": {"dtype": torch.bfloat16}}
    loaded = {}
    for device in ("cpu", "neuron"):
        model = cls(saved, device=device, **kwargs)
        loaded[device] = _encode(model.to(torch.bfloat16) if case == "static" else model, case)
    why, err = compare_bf16(loaded["neuron"], loaded["cpu"], expected)
    row["pretrained_max_err"] = err
    _set(row, "pretrained", "mismatch" if why else "pass", why or "")


def _row(case):
    return dict(_record(case, case.split(":")[0]), pretrained="skipped")


def _column(row, column, fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - every failure is a row's error, with its first line
        _set(row, column, "error", first_line(exc))
        return None


def run_case(case):
    """Runs one case on the CPU and on neuron; returns its row (the transformers sweep's schema)."""
    import torch
    import torchneuron

    start = time.monotonic()
    row = _row(case)
    with tempfile.TemporaryDirectory(prefix="tn-st-") as workdir:
        try:
            cpu_model = build(case, workdir).eval()
            expected = _encode(cpu_model, case)
            expected_out = _outputs(cpu_model, case, "cpu")
        except Exception as exc:  # noqa: BLE001
            row.update(reference="error", status="reference_error", time_s=round(time.monotonic() - start, 2))
            row["reasons"]["reference"] = first_line(exc)
            return row
        row.update(reference="pass", built=True, strategy="tiny")
        try:
            expected_grads = _grads(cpu_model, expected_out)
        except Exception as exc:  # noqa: BLE001 - the model's own backward, not the device's
            expected_grads = None
            _set(row, "backward", "skipped", f"the CPU backward raises: {first_line(exc)}")
        torchneuron.reset_fallback_report()
        model = _column(row, "load", lambda: copy.deepcopy(cpu_model).to("neuron"))
        if model is not None:
            _set(row, "load", "pass")
            got = _column(row, "forward", lambda: _encode(model, case))
            if got is not None:
                why, row["forward_max_err"] = compare_tensors(got, expected)
                _set(row, "forward", "mismatch" if why else "pass", why or "")
            grads = None if expected_grads is None else _column(
                row, "backward", lambda: _grads(model, _outputs(model, case, "neuron")))
            if grads is not None:
                why, row["backward_max_err"] = compare_tensors(grads, expected_grads)
                _set(row, "backward", "mismatch" if why else "pass", why or "")

            def compiled():
                compiled_model = torch.compile(model, backend="neuron")
                with torch.no_grad(), _counting_graphs(row):
                    return _outputs(compiled_model, case, "neuron")
            out = _column(row, "compile", compiled)
            if out is not None:
                why, row["compile_max_err"] = compare_tensors(out, {k: v.detach() for k, v in expected_out.items()})
                _set(row, "compile", "mismatch" if why else "pass", why or "")
            _set(row, "compile_backward", "n/a")  # the backward column covers training here
            _column(row, "pretrained", lambda: _pretrained(cpu_model, case, workdir, expected, row))
        report = torchneuron.fallback_report()
        row["fallback"] = dict(sorted(report.items(), key=lambda kv: (-kv[1], kv[0])))
    worst = max(RANK[row[c]] for c in COLUMNS)
    row["status"] = {1: "pass", 2: "mismatch", 3: "error"}.get(worst, "skipped")
    row["time_s"] = round(time.monotonic() - start, 2)
    return row


class SentenceRunner(SweepRunner):
    """conformance.run_tasks' runner: one task is one case (the worker set up as the sweep's)."""

    def run(self, task):
        return run_case(task)

    def failed(self, task, detail, trace=None):
        row = _row(task)
        for column in COLUMNS:
            _set(row, column, "error", detail)
        row["status"] = "error"
        return row


def markdown(rows, elapsed):
    """The run as a Markdown table, one row per case, and the totals."""
    import sentence_transformers
    columns = ("forward", "backward", "compile", "pretrained")
    ran = [r for r in rows if r["reference"] == "pass"]
    lines = [f"sentence-transformers {sentence_transformers.__version__}: {len(rows)} cases, {len(ran)} built and "
             f"run on the CPU, {sum(r['status'] == 'pass' for r in ran)} pass every column with no CPU fallback "
             f"({elapsed:.0f} s)", "", "| case | " + " | ".join(columns) + " | fallback | reason |",
             "| --- |" + " --- |" * (len(columns) + 2)]
    for r in rows:
        reason = "; ".join(f"{k}: {v}" for k, v in r["reasons"].items())[:160]
        fallback = ", ".join(f"{k} ({v})" for k, v in r["fallback"].items()) or "none"
        lines.append(f"| {r['model']} | " + " | ".join(r[c] for c in columns) + f" | {fallback} | {reason} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    from torchneuron.conformance.workers import run_tasks

    p = argparse.ArgumentParser(prog="python -m torchneuron.sweep.sentence", description=__doc__.splitlines()[0])
    p.add_argument("--cases", help="comma-separated case names (default: all; --list shows them)")
    p.add_argument("--list", action="store_true", help="print the case names and exit")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    p.add_argument("--output", default="sentence-sweep.json")
    p.add_argument("--markdown", default="sentence-sweep.md")
    args = p.parse_args(argv)
    if args.list:
        print("\n".join(cases()))
        return 0
    _set_offline()
    names = [c.strip() for c in args.cases.split(",")] if args.cases else cases()
    unknown = sorted(set(names) - set(cases()))
    if unknown:
        raise SystemExit(f"sentence sweep: unknown cases {', '.join(unknown)} (--list shows them)")
    start = time.monotonic()
    rows = run_tasks(names, args.jobs, args.timeout, runner=SentenceRunner(), on_result=_progress())
    elapsed = time.monotonic() - start
    sys.stderr.write("\n")
    with open(args.output, "w") as f:
        json.dump({"elapsed_s": round(elapsed, 1), "models": rows}, f, indent=1)
    with open(args.markdown, "w") as f:
        f.write(markdown(rows, elapsed))
    print(markdown(rows, elapsed).splitlines()[0])
    return 0 if all(r["status"] == "pass" and not r["fallback"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
