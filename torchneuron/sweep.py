"""Model sweep: every Hugging Face `transformers` architecture, tiny and random, on CPU and `neuron`.

Usage:
    python -m torchneuron.sweep --ci          # 5 models; exits 1 unless all pass eager and compiled
    python -m torchneuron.sweep --jobs 2 --timeout 120 --output sweep.json --markdown sweep.md
    python -m torchneuron.sweep --models bert,gpt2 --limit 10

One entry per model type in transformers' auto mappings: the base model class (AutoModel), or the
first task head when a type has no base model. Its config class is built with defaults and then
shrunk (few layers, hidden size 32, small vocabulary, 32x32 images; nested sub-configs too), the
model is built on the CPU with a fixed seed and put in eval() mode (load), a deep copy is moved to
`neuron`, and both run forward on the same inputs (forward) and a backward step from the sum of the
floating outputs (backward). Outputs and parameter gradients are compared with the CPU as the
reference (atol = rtol = 1e-4, float32). `compile` runs torch.compile(backend="neuron") forward
under no_grad; `compile_backward` runs it with autograd and compares the gradients of the same
loss. `fallback` lists the ATen ops that fell back to the CPU during the
neuron run (copy, forward, backward), with calls.

Every model runs in a spawned worker (conformance.run_tasks), so a hang (`--timeout` seconds per
model) or a crash is recorded as an error and the run goes on. Column statuses are pass | mismatch
| error | skipped | n/a; every skip carries its reason in `reasons`. Nothing is downloaded:
HF_HUB_OFFLINE=1 is set.
"""

import argparse
import contextlib
import copy
import inspect
import json
import os
import random
import sys
import time

from torchneuron.conformance import run_tasks

ATOL = RTOL = 1e-4
CI_MODELS = ("bert", "gpt2", "llama", "vit", "wav2vec2")
BATCH, SEQ = 2, 8
AUDIO_SAMPLES = 1600
COLUMNS = ("load", "forward", "backward", "compile", "compile_backward")
RANK = {"n/a": 0, "skipped": 0, "pass": 1, "mismatch": 2, "error": 3}

# Size attributes shrunk when a config has them (and they are larger), by target value.
_LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers",
           "decoder_layers", "num_encoder_layers", "num_decoder_layers")
_SHRINK = {
    2: _LAYERS + ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "num_experts_per_tok",
                  "moe_top_k"),
    32: ("hidden_size", "d_model", "n_embd", "embed_dim", "word_embed_proj_dim", "projection_dim",
         "text_embed_dim", "vision_embed_dim", "audio_embed_dim"),
    4: ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads",
        "decoder_attention_heads", "num_experts", "num_local_experts", "n_routed_experts",
        "patch_size"),
    8: ("head_dim", "d_kv", "kv_channels", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
        "num_queries"),
    16: ("num_conv_pos_embeddings", "max_source_positions", "kv_lora_rank", "q_lora_rank"),
    37: ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
         "decoder_intermediate_size"),
    64: ("max_position_embeddings", "n_positions", "max_target_positions", "n_ctx",
         "moe_intermediate_size", "shared_expert_intermediate_size"),
    128: ("vocab_size",),
    1: ("n_shared_experts", "first_k_dense_replace"),
}
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")
_IMAGE_SIZE = 32
_SPECIAL_ROOM = 16  # the top ids of the tiny vocabulary hold the special tokens


def _set_offline():
    """Keeps transformers and huggingface_hub off the network and quiet."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _is_int(value):
    """True for a plain int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _sub_config_names(config):
    """Returns the attribute names of the nested sub-configs of a config."""
    from transformers import PreTrainedConfig
    names = list(getattr(config, "sub_configs", None) or {})
    names += [k for k in vars(config) if k.endswith("_config") and k not in names]
    return [n for n in names if isinstance(getattr(config, n, None), PreTrainedConfig)]


def shrink_overrides(config):
    """Returns {attribute: tiny value} for the size attributes a config has (sub-configs nested)."""
    values = {k: v for k, v in vars(config).items() if not k.startswith("_")}
    out = {}
    for target, names in _SHRINK.items():
        for name in names:
            if _is_int(values.get(name)) and values[name] > target:
                out[name] = target
    if any(_is_int(values.get(n)) for n in _EXPERTS) and "intermediate_size" in out:
        out["intermediate_size"] = 64  # grouped_mm wants 16-byte aligned expert strides
    if isinstance(values.get("image_size"), (list, tuple)):
        out["image_size"] = [_IMAGE_SIZE] * len(values["image_size"])
    elif _is_int(values.get("image_size")) and values["image_size"] > _IMAGE_SIZE:
        out["image_size"] = _IMAGE_SIZE
    for name in ("depths",):
        if isinstance(values.get(name), (list, tuple)) and all(map(_is_int, values[name])):
            out[name] = [1] * len(values[name])
    if isinstance(values.get("conv_dim"), (list, tuple)):
        out["conv_dim"] = [32] * len(values["conv_dim"])
    layers = [values[n] for n in _LAYERS if _is_int(values.get(n))]
    for name, value in values.items():  # per-layer lists/patterns follow the layer count
        if layers and isinstance(value, (list, str)) and len(value) == layers[0] > 2 and (
                "layer" in name or "pattern" in name or "types" in name):
            out[name] = _two_layers(value)
    vocab = out.get("vocab_size", values.get("vocab_size"))
    for name in _sub_config_names(config):
        sub = getattr(config, name)
        out[name] = {**sub.to_dict(), **shrink_overrides(sub)}
        if vocab is None and name == "text_config":
            vocab = out[name].get("vocab_size")
    if _is_int(vocab):
        out.update(_remap_token_ids(values, vocab))
    return out


def _two_layers(pattern):
    """Returns two entries of a per-layer list or pattern, two different kinds where it has them."""
    other = next((x for x in pattern[1:] if x != pattern[0]), pattern[1])
    both = [pattern[0], other]
    return "".join(both) if isinstance(pattern, str) else both


def _remap_token_ids(values, vocab):
    """Moves special token ids that fall outside a tiny vocabulary to its top ids."""
    out, free = {}, iter(range(vocab - 1, vocab - 1 - _SPECIAL_ROOM, -1))
    seen = {}

    def fit(token):
        """Returns the tiny-vocabulary id for one special token id."""
        if not _is_int(token) or token < vocab - _SPECIAL_ROOM:
            return token
        if token not in seen:
            seen[token] = next(free, vocab - 1)
        return seen[token]
    for name, value in sorted(values.items()):
        if not (name.endswith("_token_id") or name.endswith("_token_index")
                or name.endswith("_token_ids")):
            continue
        new = [fit(v) for v in value] if isinstance(value, list) else fit(value)
        if new != value:
            out[name] = new
    return out


def tiny_config(config_class):
    """Returns config_class built with defaults, then shrunk (see shrink_overrides)."""
    default = config_class()
    overrides = shrink_overrides(default)
    try:
        return config_class(**overrides)
    except Exception:  # noqa: BLE001  (some configs reject re-init; set attributes instead)
        config = copy.deepcopy(default)
        _apply(config, overrides)
        return config


def _apply(config, overrides):
    """Sets overrides on a config object, recursing into sub-config dicts."""
    for name, value in overrides.items():
        current = getattr(config, name, None)
        if isinstance(value, dict) and hasattr(current, "to_dict"):
            _apply(current, {k: v for k, v in value.items() if getattr(current, k, v) != v})
        else:
            setattr(config, name, value)


def architectures():
    """Returns {model type: model class name}: AutoModel's class, else the first task head's."""
    _set_offline()
    from transformers.models.auto import modeling_auto
    names = {}
    mappings = [getattr(modeling_auto, "MODEL_MAPPING_NAMES")]
    mappings += [getattr(modeling_auto, n) for n in sorted(dir(modeling_auto))
                 if n.startswith("MODEL_FOR_") and n.endswith("_MAPPING_NAMES")]
    for mapping in mappings:
        for model_type, cls in mapping.items():
            names.setdefault(model_type, cls if isinstance(cls, str) else cls[0])
    return dict(sorted(names.items()))


def build_model(model_type, class_name=None):
    """Builds the tiny, seeded, eval-mode float32 CPU model of a type; returns (model, config)."""
    _set_offline()
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    class_name = class_name or architectures().get(model_type)
    if class_name is None:
        raise LookupError(f"unknown model type {model_type!r}")
    config = tiny_config(CONFIG_MAPPING[model_type])
    _seed()
    model = getattr(transformers, class_name)(config)
    return model.float().eval(), config


def _seed(seed=0):
    """Seeds Python, NumPy and torch."""
    import numpy
    import torch
    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)


def _vision(config):
    """Returns (channels, image size) from a config or its vision sub-config."""
    for c in (config, getattr(config, "vision_config", None)):
        size = getattr(c, "image_size", None)
        if size is not None:
            size = size if _is_int(size) else size[0]
            return getattr(c, "num_channels", 3) or 3, size
    return 3, _IMAGE_SIZE


def _vocab(config):
    """Returns the text vocabulary size of a config (or of its text sub-config)."""
    for c in (config, getattr(config, "text_config", None), getattr(config, "decoder", None)):
        if _is_int(getattr(c, "vocab_size", None)):
            return c.vocab_size
    return 128


def input_candidates(model, config):
    """Returns the input dicts to try, in order; the first one the CPU model accepts is used."""
    import torch
    gen = torch.Generator().manual_seed(0)
    params = inspect.signature(model.forward).parameters
    high = max(4, _vocab(config) - _SPECIAL_ROOM)
    ids = torch.randint(3, high, (BATCH, SEQ), generator=gen)
    channels, size = _vision(config)
    pixels = torch.randn(BATCH, channels, size, size, generator=gen)
    mels = (getattr(config, "num_mel_bins", None) or getattr(config, "feature_size", None)
            or getattr(config, "input_feat_per_channel", None) or 80)
    frames = 2 * getattr(config, "max_source_positions", 32) if hasattr(
        config, "max_source_positions") else 64
    feats = torch.randn(BATCH, mels, frames, generator=gen)
    base = {"input_ids": ids, "pixel_values": pixels, "input_features": feats,
            "input_values": torch.randn(BATCH, AUDIO_SAMPLES, generator=gen)}
    names = getattr(model, "main_input_name", "input_ids")
    names = [names] if isinstance(names, str) else list(names)  # some models name several
    main = names[0]
    first = {}
    for name in names:
        if name in base:
            first[name] = base[name]
        elif name.endswith(("_ids", "_inputs")):  # token ids, as OneFormer's task_inputs
            first[name] = ids.clone()
        else:
            return [], f"main input {name!r} has no generator in the sweep"
    if "input_ids" in first and "attention_mask" in params:
        first["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        first["decoder_input_ids"] = ids.clone()
    cands = [first]
    if main == "input_features":
        cands.append({**first, "input_features": feats.transpose(1, 2).contiguous()})
    both = {k: v for k, v in base.items() if k in ("input_ids", "pixel_values") and k in params}
    if len(both) == 2:
        cands.append({**first, **both})
    return cands, ""


def float_outputs(out, prefix="out"):
    """Flattens a ModelOutput / tuple / dict into {path: floating tensor}."""
    import torch
    if isinstance(out, torch.Tensor):
        return {prefix: out} if out.is_floating_point() else {}
    if hasattr(out, "items"):
        items = out.items()
    elif isinstance(out, (list, tuple)):
        items = enumerate(out)
    else:
        return {}
    flat = {}
    for key, value in items:
        flat.update(float_outputs(value, f"{prefix}.{key}"))
    return flat


def compare_tensors(actual, expected):
    """Compares {name: tensor} dicts; returns (None or reason, max abs error)."""
    import torch
    worst, why = 0.0, None
    for name, exp in expected.items():
        act = actual.get(name)
        if act is None or act.shape != exp.shape:
            why = why or (f"{name}: missing on neuron" if act is None else
                          f"{name}: shape {tuple(act.shape)} != {tuple(exp.shape)}")
            continue
        act, exp = act.detach().cpu().double(), exp.detach().double()
        diff = (act - exp).abs()
        both_nan = torch.isnan(act) & torch.isnan(exp)
        finite = diff[torch.isfinite(diff)]
        if finite.numel():
            worst = max(worst, finite.max().item())
        bad = ~((diff <= ATOL + RTOL * exp.abs()) | both_nan)
        if bad.any() and why is None:
            why = f"{name}: {int(bad.sum())}/{bad.numel()} elements differ"
    return why, worst


def _record(model_type, class_name):
    """Returns an empty sweep row."""
    return {"model": model_type, "class": class_name, "status": "skipped",
            "load": "skipped", "forward": "skipped", "backward": "skipped", "compile": "skipped",
            "compile_backward": "skipped", "reasons": {}, "fallback": {}, "forward_max_err": None,
            "backward_max_err": None, "compile_max_err": None, "compile_backward_max_err": None,
            "graphs_compiled": 0, "graphs_eager": 0, "time_s": None}


def _first_line(exc):
    """Returns 'Type: first line of message' for an exception."""
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {text}".rstrip(": ")


def _set(row, column, status, reason=""):
    """Sets a column's status and (for anything but pass) its reason."""
    row[column] = status
    if reason:
        row["reasons"][column] = reason


def _cpu_reference(model, config, row):
    """Finds inputs the CPU model accepts; returns (inputs, outputs) or (None, None) with a reason."""
    cands, why = input_candidates(model, config)
    errors = [why] if why else []
    for inputs in cands:
        _seed()
        try:
            out = model(**inputs)
        except Exception as exc:  # noqa: BLE001
            errors.append(_first_line(exc))
            continue
        return inputs, out
    reason = "CPU reference forward raised " + (errors[-1] if errors else "(no inputs)")
    for column in ("forward", "backward", "compile", "compile_backward"):
        _set(row, column, "skipped", reason)
    return None, None


def _loss(outputs):
    """Returns the sum of the floating outputs that require grad, or None."""
    parts = [t.float().sum() for t in outputs.values() if t.requires_grad]
    return sum(parts) if parts else None


def _backward(model, outputs):
    """Runs backward from the output sum; returns {parameter name: grad} or None without a graph."""
    loss = _loss(outputs)
    if loss is None:
        return None
    loss.backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def _neuron_run(model, inputs, expected, expected_grads, row):
    """Runs the neuron model forward and backward; fills the row's columns and returns the
    outputs and the parameter gradients (on CPU), each None when not computed."""
    import torch
    dev = {k: v.to("neuron") for k, v in inputs.items()}
    _seed()
    try:
        out = float_outputs(model(**dev))
    except Exception as exc:  # noqa: BLE001
        _set(row, "forward", "error", _first_line(exc))
        _set(row, "backward", "skipped", "forward failed on neuron")
        return None, None
    why, row["forward_max_err"] = compare_tensors(out, expected)
    _set(row, "forward", "mismatch" if why else "pass", why or "")
    if expected_grads is None:
        _set(row, "backward", "skipped", "no floating output requires grad")
        return out, None
    try:
        grads = _backward(model, out)
        grads = {n: g.cpu() for n, g in (grads or {}).items()}
        torch.neuron.synchronize()
    except Exception as exc:  # noqa: BLE001
        _set(row, "backward", "error", _first_line(exc))
        return out, None
    why, row["backward_max_err"] = compare_tensors(grads, expected_grads)
    _set(row, "backward", "mismatch" if why else "pass", why or "")
    return out, grads


def _compile_run(model, cpu_model, inputs, expected, row):
    """Runs torch.compile(backend='neuron') forward when that backend exists and returns its
    outputs (None if it did not run). A mismatch is checked against Dynamo's own `eager` backend
    on the CPU model: when that gives the same output, the reason says the difference comes from
    tracing, not from neuron."""
    import torch
    if "neuron" not in torch._dynamo.list_backends():
        _set(row, "compile", "n/a", "backend not built yet")
        return
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="neuron")
        _seed()
        with torch.no_grad(), _counting_graphs(row):
            out = float_outputs(compiled(**{k: v.to("neuron") for k, v in inputs.items()}))
    except Exception as exc:  # noqa: BLE001
        _set(row, "compile", "error", _first_line(exc) + _if_dynamo_cpu_raises(cpu_model, inputs))
        return
    why, row["compile_max_err"] = compare_tensors(out, expected)
    if why and _dynamo_cpu_agrees(cpu_model, inputs, out):
        why += " (Dynamo's eager backend on CPU gives the same output: a tracing difference, not neuron's)"
    _set(row, "compile", "mismatch" if why else "pass", why or "")
    return out


def _compile_backward_run(model, cpu_model, inputs, expected_grads, eager_grads, row):
    """Runs a compiled training step's gradients: torch.compile(backend='neuron') forward with
    autograd, then backward from the same loss; compares the parameter gradients with the CPU
    and returns them (None if they were not computed).
    A mismatch that eager neuron's backward, or Dynamo's eager backend on the CPU model, shares
    (within tolerance) says so."""
    import torch
    if row["compile"] == "n/a":
        _set(row, "compile_backward", "n/a", row["reasons"].get("compile", ""))
        return
    if expected_grads is None:
        _set(row, "compile_backward", "skipped", "no floating output requires grad")
        return
    try:
        model.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="neuron")
        _seed()
        with _counting_graphs(row):
            out = float_outputs(compiled(**{k: v.to("neuron") for k, v in inputs.items()}))
            grads = {n: g.cpu() for n, g in (_backward(model, out) or {}).items()}
    except Exception as exc:  # noqa: BLE001
        _set(row, "compile_backward", "error", _first_line(exc) + _if_dynamo_cpu_raises(cpu_model, inputs))
        return
    why, row["compile_backward_max_err"] = compare_tensors(grads, expected_grads)
    if why and eager_grads is not None and compare_tensors(grads, eager_grads)[0] is None:
        why += " (as in eager neuron's backward)"
    elif why and _dynamo_cpu_grads_agree(cpu_model, inputs, grads):
        why += " (Dynamo's eager backend on CPU gives the same gradients: a tracing difference, not neuron's)"
    _set(row, "compile_backward", "mismatch" if why else "pass", why or "")
    return grads


@contextlib.contextmanager
def _counting_graphs(row):
    """Adds to the row the graphs the neuron compiler compiled and those it gave back to run
    eagerly (a rejected graph or a compiler failure), with the first such warning as the reason:
    a compiled column can pass on graphs that never ran compiled."""
    import warnings
    import torchneuron
    torchneuron.reset_compile_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            stats = torchneuron.compile_stats()
            row["graphs_compiled"] += stats["graphs_compiled"]
            row["graphs_eager"] += stats["graphs_eager"]
            given_back = [str(w.message) for w in caught if str(w.message).startswith("torchneuron.compile:")]
            if given_back and "graphs_eager" not in row["reasons"]:
                row["reasons"]["graphs_eager"] = given_back[0][:300]


def _dynamo_cpu_grads_agree(cpu_model, inputs, grads):
    """True if the CPU model's gradients through torch.compile(backend='eager') match `grads`.
    The CPU model's own gradients are set aside and put back."""
    import torch
    saved = {n: p.grad for n, p in cpu_model.named_parameters()}
    try:
        cpu_model.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        _seed()
        traced = _backward(cpu_model, float_outputs(torch.compile(cpu_model, backend="eager")(**inputs)))
        return traced is not None and compare_tensors(grads, traced)[0] is None
    except Exception:  # noqa: BLE001 - no verdict: the mismatch stands as it is
        return False
    finally:
        for n, p in cpu_model.named_parameters():
            p.grad = saved[n]


def _dynamo_cpu_forward(cpu_model, inputs):
    """The CPU model's float outputs through torch.compile(backend='eager'), under no_grad: what
    Dynamo's tracing alone gives, with no neuron code involved. Raises what that raises."""
    import torch
    torch._dynamo.reset()
    _seed()
    with torch.no_grad():
        return float_outputs(torch.compile(cpu_model, backend="eager")(**inputs))


def _if_dynamo_cpu_raises(cpu_model, inputs):
    """A note for a compile error: whether Dynamo's eager backend on the CPU model raises too,
    which makes the error Dynamo's tracing of the model, not neuron's."""
    try:
        _dynamo_cpu_forward(cpu_model, inputs)
    except Exception:  # noqa: BLE001 - any error there is the model's under Dynamo
        return " (Dynamo's eager backend on CPU raises too: a tracing problem, not neuron's)"
    return ""


def _dynamo_cpu_agrees(cpu_model, inputs, out):
    """True if torch.compile(backend='eager') of the CPU model matches `out` (CPU tensors)."""
    try:
        traced = _dynamo_cpu_forward(cpu_model, inputs)
    except Exception:  # noqa: BLE001 - no verdict: the mismatch stands as it is
        return False
    return compare_tensors(out, traced)[0] is None


def run_model(model_type, class_name=None):
    """Runs one model type through load / forward / backward / compile; returns its row."""
    import torchneuron
    start = time.monotonic()
    class_name = class_name or architectures().get(model_type)
    row = _record(model_type, class_name)
    try:
        model, config = build_model(model_type, class_name)
    except Exception as exc:  # noqa: BLE001
        _set(row, "load", "skipped", "tiny model could not be built on CPU: " + _first_line(exc))
        for column in ("forward", "backward", "compile", "compile_backward"):
            _set(row, column, "skipped", "model not built")
        return _finish(row, start)
    inputs, cpu_out = _cpu_reference(model, config, row)
    expected = float_outputs(cpu_out) if cpu_out is not None else {}
    expected_grads = _backward(model, expected) if inputs is not None else None
    torchneuron.reset_fallback_report()
    try:
        neuron_model = copy.deepcopy(model).to("neuron")
        neuron_model.zero_grad(set_to_none=True)
        _set(row, "load", "pass")
    except Exception as exc:  # noqa: BLE001
        _set(row, "load", "error", "copy to neuron raised " + _first_line(exc))
        return _finish(row, start, torchneuron)
    if inputs is not None:
        eager_out, eager_grads = _neuron_run(neuron_model, inputs, expected, expected_grads, row)
        compiled_out = _compile_run(neuron_model, model, inputs, expected, row)
        compiled_grads = _compile_backward_run(neuron_model, model, inputs, expected_grads, eager_grads, row)
        results = {"forward": (eager_out, expected), "backward": (eager_grads, expected_grads),
                   "compile": (compiled_out, expected), "compile_backward": (compiled_grads, expected_grads)}
        _weigh_mismatches_against_float64(row, model, inputs, results)
    return _finish(row, start, torchneuron)


def _float64_reference(cpu_model, inputs):
    """Outputs and parameter gradients of a float64 copy of the CPU model on the same inputs, or
    None when the model does not run in float64."""
    try:
        model = copy.deepcopy(cpu_model).double()
        model.zero_grad(set_to_none=True)
        wide = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
        _seed()
        out = float_outputs(model(**wide))
        detached = {k: v.detach().clone() for k, v in out.items()}
        return detached, _backward(model, out)
    except Exception:  # noqa: BLE001 - no verdict: the mismatch stands as it is
        return None


def _weigh_mismatches_against_float64(row, cpu_model, inputs, results):
    """Adds to each mismatch's reason the largest errors of neuron and of CPU float32 against a
    float64 run of the CPU model: a tolerance miss where neuron is the closer of the two is CPU
    rounding, not a neuron bug. The status stays a mismatch either way."""
    columns = [c for c, (actual, expected) in results.items()
               if row[c] == "mismatch" and actual is not None and expected is not None]
    if not columns:
        return
    reference = _float64_reference(cpu_model, inputs)
    if reference is None:
        return
    outputs, grads = reference
    for column in columns:
        actual, expected = results[column]
        wide = outputs if column in ("forward", "compile") else grads
        if wide is None:
            continue
        _, neuron_error = compare_tensors(actual, wide)
        _, cpu_error = compare_tensors(expected, wide)
        row["reasons"][column] += (f"; against float64: neuron's largest error {neuron_error:.2g},"
                                   f" CPU float32's {cpu_error:.2g}")


def _finish(row, start, torchneuron=None):
    """Fills the fallback list, overall status and time of a row."""
    if torchneuron is not None:
        report = torchneuron.fallback_report()
        row["fallback"] = dict(sorted(report.items(), key=lambda kv: (-kv[1], kv[0])))
    worst = max(RANK[row[c]] for c in COLUMNS)
    row["status"] = ("skipped" if row["load"] == "skipped" or worst == 0 else
                     {1: "pass", 2: "mismatch", 3: "error"}[worst])
    if row["status"] == "pass" and row["forward"] == "skipped":
        row["status"] = "skipped"
    row["time_s"] = round(time.monotonic() - start, 2)
    return row


class SweepRunner:
    """The sweep's task runner for conformance.run_tasks: one task is one model type."""

    def setup(self):
        """Prepares a fresh worker: offline, quiet, one compute thread, silent fallbacks."""
        import warnings
        _set_offline()
        warnings.simplefilter("ignore")
        import torch
        import torchneuron
        torch.set_num_threads(1)
        torchneuron.set_fallback_mode("silent")
        import transformers
        transformers.logging.set_verbosity_error()
        self.names = architectures()

    def run(self, task):
        """Runs one model type and returns its row."""
        return run_model(task, self.names.get(task))

    def failed(self, task, detail, trace=None):
        """Returns the error row of a model whose run raised, timed out or killed its worker."""
        row = _record(task, None)
        for column in COLUMNS:
            _set(row, column, "error", detail)
        row["status"] = "error"
        if trace:
            row["trace"] = trace
        return row


def totals(rows):
    """Returns the sweep's counts: built, forward/backward pass, mismatches, errors, skipped."""
    count = (lambda col, status: sum(r[col] == status for r in rows))
    return {"models": len(rows), "built": count("load", "pass"),
            "forward_pass": count("forward", "pass"), "backward_pass": count("backward", "pass"),
            "compile_pass": count("compile", "pass"),
            "compile_backward_pass": count("compile_backward", "pass"),
            "graphs_compiled": sum(r.get("graphs_compiled", 0) for r in rows),
            "graphs_eager": sum(r.get("graphs_eager", 0) for r in rows),
            "models_with_eager_graphs": sum(r.get("graphs_eager", 0) > 0 for r in rows),
            "mismatch": sum(r["status"] == "mismatch" for r in rows),
            "error": sum(r["status"] == "error" for r in rows),
            "skipped": sum(r["status"] == "skipped" for r in rows),
            "pass": sum(r["status"] == "pass" for r in rows)}


def top_reasons(rows, n=10):
    """Returns [(reason, models)] for the most common non-pass reasons (first column per model)."""
    agg = {}
    for r in rows:
        for column in COLUMNS:
            if r[column] in ("error", "mismatch", "skipped") and column in r["reasons"]:
                reason = r["reasons"][column][:120]
                agg[reason] = agg.get(reason, 0) + 1
                break
    return sorted(agg.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def top_fallbacks(rows, n=20):
    """Returns [(aten op, models using it, calls)] for the n most used fallback ops."""
    agg = {}
    for r in rows:
        for name, calls in r["fallback"].items():
            k, c = agg.get(name, (0, 0))
            agg[name] = (k + 1, c + calls)
    return sorted(((k, m, c) for k, (m, c) in agg.items()), key=lambda t: (-t[1], -t[2], t[0]))[:n]


def _cell(row, column):
    """Returns a Markdown cell: the status, plus the reason for anything not passing."""
    status, reason = row[column], row["reasons"].get(column, "")
    if status == "n/a":
        text = f"n/a ({reason})" if reason else status
    else:
        text = f"{status}: {reason[:80]}" if reason and status != "pass" else status
    return text.replace("|", "\\|")


def markdown(rows, elapsed=None, version=None):
    """Returns the Markdown report: totals, top reasons and fallbacks, one row per model."""
    t = totals(rows)
    lines = ["# torchneuron transformers sweep", ""]
    if version:
        lines += [f"transformers {version}; tolerance atol = rtol = {ATOL:g} (float32)", ""]
    if elapsed is not None:
        lines += [f"Run time: {elapsed:.1f} s", ""]
    lines += ["| models | built | forward pass | backward pass | compile pass | compile backward pass "
              "| mismatch | error | skipped |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
              f"| {t['models']} | {t['built']} | {t['forward_pass']} | {t['backward_pass']} "
              f"| {t['compile_pass']} | {t['compile_backward_pass']} | {t['mismatch']} | {t['error']} "
              f"| {t['skipped']} |", "",
              f"Compiled graphs: {t['graphs_compiled']}; given back to run eagerly: {t['graphs_eager']} "
              f"(in {t['models_with_eager_graphs']} models; the reason is under `graphs_eager` in "
              "each row's reasons).",
              "", "## Most common reasons", "", "| reason | models |", "| --- | --- |"]
    lines += [f"| {r.replace('|', chr(92) + '|')} | {k} |" for r, k in top_reasons(rows)]
    lines += ["", "## Most used fallback ops", "", "| aten op | models | calls |",
              "| --- | --- | --- |"]
    lines += [f"| `{name}` | {m} | {c} |" for name, m, c in top_fallbacks(rows)]
    lines += ["", "## Models", "", "| model | load | forward | backward | compile | compile backward "
              "| fallbacks (op names) | max error | time (s) |", "| --- | --- | --- | --- | --- | --- "
              "| --- | --- | --- |"]
    for r in rows:
        ops = [n.replace("aten::", "") for n in r["fallback"]]
        shown = ", ".join(ops[:8]) + (f", +{len(ops) - 8} more" if len(ops) > 8 else "")
        errs = [e for e in (r["forward_max_err"], r["backward_max_err"]) if e is not None]
        err = f"{max(errs):.2g}" if errs else ""
        cells = " | ".join(_cell(r, c) for c in COLUMNS)
        lines.append(f"| {r['model']} | {cells} | {len(ops)}: {shown} | {err} | {r['time_s']} |")
    return "\n".join(lines) + "\n"


def _progress():
    """Returns an on_result callback that prints a progress line to stderr."""
    tty, counts = sys.stderr.isatty(), {}

    def show(row, done, total):
        """Prints one progress line."""
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        width = len(str(total))
        line = (f"[{done:>{width}}/{total}] {row['model'][:28]:<28} {row['status']:<8} "
                + " ".join(f"{s}={counts.get(s, 0)}" for s in ("pass", "mismatch", "error",
                                                               "skipped")))
        sys.stderr.write(("\r" + line + "\x1b[K") if tty else line + "\n")
        sys.stderr.flush()
    return show


def parse_args(argv=None):
    """Parses the command line."""
    p = argparse.ArgumentParser(prog="python -m torchneuron.sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", help="comma-separated model types (e.g. bert,gpt2)")
    p.add_argument("--ci", action="store_true", help=f"run the CI subset: {','.join(CI_MODELS)}")
    p.add_argument("--limit", type=int, help="run only the first N model types")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per model")
    p.add_argument("--output", default="sweep.json", help="JSON report path")
    p.add_argument("--markdown", default="sweep.md", help="Markdown report path")
    return p.parse_args(argv)


def select(names, wanted=None, limit=None):
    """Returns the model types to run: `wanted` in order (unknown ones kept, they record a skip)."""
    keys = list(wanted) if wanted else list(names)
    return keys[:limit] if limit else keys


def main(argv=None):
    """Command-line entry point; returns the process exit code."""
    args = parse_args(argv)
    _set_offline()
    import transformers
    wanted = list(CI_MODELS) if args.ci else []
    wanted += [m.strip() for m in (args.models or "").split(",") if m.strip()]
    models = select(architectures(), wanted, args.limit)
    start = time.monotonic()
    rows = run_tasks(models, args.jobs, args.timeout, runner=SweepRunner(),
                     on_result=_progress())
    elapsed = time.monotonic() - start
    sys.stderr.write("\n")
    report = {"totals": totals(rows), "elapsed_s": round(elapsed, 1),
              "transformers": transformers.__version__, "tolerance": {"atol": ATOL, "rtol": RTOL},
              "models": rows}
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
    with open(args.markdown, "w") as f:
        f.write(markdown(rows, elapsed, transformers.__version__))
    t = report["totals"]
    print(f"sweep: {t['models']} models in {elapsed:.1f} s: built={t['built']} "
          f"forward_pass={t['forward_pass']} backward_pass={t['backward_pass']} "
          f"compile_pass={t['compile_pass']} compile_backward_pass={t['compile_backward_pass']} "
          f"graphs_compiled={t['graphs_compiled']} graphs_eager={t['graphs_eager']} "
          f"mismatch={t['mismatch']} error={t['error']} skipped={t['skipped']} "
          f"-> {args.output}, {args.markdown}")
    if args.ci:
        checked = ("forward", "backward", "compile", "compile_backward")
        failing = [f"{r['model']} ({', '.join(c for c in checked if r[c] not in ('pass', 'n/a'))})"
                   for r in rows if any(r[c] not in ("pass", "n/a") for c in checked)]
        failing += [f"{r['model']} ({r['graphs_eager']} graphs given back to run eagerly: "
                    f"{r['reasons'].get('graphs_eager', '')})" for r in rows if r["graphs_eager"]]
        if failing:
            print(f"sweep CI: no longer passing: {'; '.join(failing)}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
