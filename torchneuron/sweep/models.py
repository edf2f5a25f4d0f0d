"""The sweep's tiny models: each model type in transformers' auto mappings, its class (AutoModel's,
else the first task head's), its config built with defaults and shrunk (few layers, hidden size
32, a small vocabulary, 32x32 images; nested sub-configs too), the model built on the CPU with a
fixed seed, and the inputs to try on it."""

import copy
import inspect
import os
import random


BATCH, SEQ = 2, 8
AUDIO_SAMPLES = 1600


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
