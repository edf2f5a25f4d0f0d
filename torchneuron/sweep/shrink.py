"""Shrinking a model type's default config: a ladder of strategies, from tiny to less tiny, each
keeping the sizes a model derives from one another consistent, and a check of the shrunk config.

- "tiny": few layers, hidden size 32, 4 heads of 8, a small vocabulary and 32x32 images; head
  counts, head sizes, rotary sizes and M-RoPE sections follow the hidden size, per-layer lists and
  per-layer configs are cut to the same two layers, expert groups to one.
- "layers": only what does not change a width: layer counts (per-layer lists with them), experts,
  the vocabulary, and images down to 64x64; widths and heads stay the defaults.
- "layers_only": as "layers", with the default image size.
- "default": the config as its class builds it.

models.build_model builds one strategy; reference.prepare walks the ladder and keeps the first
whose model builds, fits the parameter budget and runs on the CPU."""

import copy


STRATEGIES = ("tiny", "layers", "layers_only", "default")
_LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers",
           "decoder_layers", "num_encoder_layers", "num_decoder_layers")
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_HEADS = ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads",
          "decoder_attention_heads", "num_heads")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads")
# Size attributes shrunk by "tiny" when a config has them (and they are larger), by target value.
_SHRINK = {
    2: _LAYERS + _KV_HEADS + ("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "moe_k"),
    32: ("hidden_size", "d_model", "n_embd", "embed_dim", "word_embed_proj_dim", "projection_dim",
         "text_embed_dim", "vision_embed_dim", "audio_embed_dim"),
    4: _HEADS + _EXPERTS + ("patch_size",),
    8: ("head_dim", "d_kv", "hidden_size_per_layer_input", "kv_channels", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
        "num_queries", "rotary_dim"),
    16: ("num_conv_pos_embeddings", "max_source_positions", "kv_lora_rank", "q_lora_rank", "mamba_d_state"),
    37: ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
         "decoder_intermediate_size"),
    64: ("max_position_embeddings", "n_positions", "max_target_positions", "n_ctx",
         "moe_intermediate_size", "shared_expert_intermediate_size"),
    128: ("vocab_size",),
    1: ("n_shared_experts", "first_k_dense_replace", "n_group", "topk_group", "num_expert_group", "n_groups"),
}
# What "layers" shrinks: nothing that is a width.
_LAYERS_ONLY = {2: _LAYERS + ("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "moe_k"), 4: _EXPERTS,
                128: ("vocab_size",),
                1: ("n_group", "topk_group", "n_shared_experts", "first_k_dense_replace", "num_expert_group")}
IMAGE_SIZE = 32
_LAYERS_IMAGE_SIZE = 64
SPECIAL_ROOM = 16  # the top ids of the tiny vocabulary hold the special tokens


def _is_int(value):
    """True for a plain int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def sub_config_names(config):
    """Returns the attribute names of the nested sub-configs of a config."""
    from transformers import PreTrainedConfig
    names = list(getattr(config, "sub_configs", None) or {})
    names += [k for k in vars(config) if k.endswith("_config") and k not in names]
    return [n for n in names if isinstance(vars(config).get(n), PreTrainedConfig)]


def _values(config):
    """The config's public attributes, read without the per-layer access checks."""
    return {k: v for k, v in vars(config).items() if not k.startswith("_")}


def shrink_overrides(config, strategy="tiny"):
    """Returns {attribute: value} that shrinks a config by a strategy (sub-configs nested)."""
    if strategy == "default":
        return {}
    values = _values(config)
    table = _SHRINK if strategy == "tiny" else _LAYERS_ONLY
    out = {}
    for target, names in table.items():
        for name in names:
            if _is_int(values.get(name)) and values[name] > target:
                out[name] = target
    for name, value in values.items():  # per-layer-input and other extra vocabularies
        if "vocab_size" in name and _is_int(value) and value > 128:
            out[name] = 128
    if any(_is_int(values.get(n)) for n in _EXPERTS) and "intermediate_size" in out:
        out["intermediate_size"] = 64  # grouped_mm wants 16-byte aligned expert strides
    if strategy == "tiny":
        _tiny_widths(values, out)
        _keep_head_groups(values, out)
    elif strategy == "layers":
        _image_size(values, out, _LAYERS_IMAGE_SIZE)
    _per_layer(config, values, out, strategy)
    _fill_derived(values, out)
    _backbone_outputs(config, out)
    types = out.get("layer_types", values.get("layer_types"))
    if values.get("rope_parameters") == {} and isinstance(types, list) and types:
        # A config that keys its RoPE by layer type but has none (its default): one per type.
        out["rope_parameters"] = {t: {"rope_type": "default", "rope_theta": 10000.0} for t in sorted(set(types))}
    vocab = out.get("vocab_size", values.get("vocab_size"))
    for name in sub_config_names(config):
        sub = vars(config)[name]
        out[name] = {**sub.to_dict(), **shrink_overrides(sub, strategy)}
        if vocab is None and name == "text_config":
            vocab = out[name].get("vocab_size")
    if _is_int(vocab):
        out.update(_remap_token_ids(values, vocab))
    return out


def _keep_head_groups(values, out):
    """Key/value heads keep their ratio to the heads (one each for multi-head and MLA models)."""
    heads = next((n for n in _HEADS if _is_int(values.get(n))), None)
    kv = next((n for n in _KV_HEADS if _is_int(values.get(n))), None)
    if heads and kv and values[kv] and values[heads] % values[kv] == 0:
        ratio = values[heads] // values[kv]
        new_heads = out.get(heads, values[heads])
        out[kv] = max(1, new_heads // ratio) if new_heads % ratio == 0 or ratio > new_heads else 1
        if out[kv] == values[kv]:
            del out[kv]


def _image_size(values, out, size):
    """Images no larger than size x size."""
    if isinstance(values.get("image_size"), (list, tuple)) and all(map(_is_int, values["image_size"])):
        if max(values["image_size"]) > size:
            out["image_size"] = [size] * len(values["image_size"])
    elif _is_int(values.get("image_size")) and values["image_size"] > size:
        out["image_size"] = size


def _tiny_widths(values, out):
    """The widths "tiny" sets besides the table: images, stage depths, conv dims, per-stage head
    lists, rotary sizes and M-RoPE sections that follow the head size."""
    _image_size(values, out, IMAGE_SIZE)
    if isinstance(values.get("depths"), (list, tuple)) and all(map(_is_int, values["depths"])):
        out["depths"] = [1] * len(values["depths"])
    if isinstance(values.get("conv_dim"), (list, tuple)):
        out["conv_dim"] = [32] * len(values["conv_dim"])
    for name in _HEADS:  # per-stage head counts (Swin): 2 divides every stage's width
        if isinstance(values.get(name), (list, tuple)) and all(map(_is_int, values[name])):
            out[name] = [min(h, 2) for h in values[name]]
    hidden = out.get("hidden_size", values.get("hidden_size"))
    heads = next((out.get(n, values.get(n)) for n in _HEADS if _is_int(values.get(n))), None)
    head_dim = out.get("head_dim", values.get("head_dim"))
    if _is_int(hidden) and _is_int(heads) and heads and not _is_int(head_dim):
        head_dim = hidden // heads
    width = next((n for n in ("hidden_size", "d_model", "n_embd", "embed_dim") if n in out), None)
    for name, value in values.items():  # sizes tied to the width (depthwise groups, codebook dims)
        if width and name not in out and _is_int(value) and value == values[width] and any(
                w in name for w in ("groups", "dim", "size", "channels")) and "vocab" not in name:
            out[name] = out[width]
    expand = values.get("expand")
    if _is_int(expand) and _is_int(hidden) and _is_int(heads) and _is_int(values.get("head_dim")):
        out["head_dim"] = head_dim = expand * hidden // heads  # Mamba-2: heads x head_dim = expand x width
    if all(_is_int(values.get(n)) for n in ("mamba_expand", "mamba_n_heads", "mamba_d_head")) and _is_int(hidden) \
            and "mamba_d_ssm" not in values:
        out["mamba_n_heads"] = 4  # hybrids' Mamba-2 layers: the same rule
        out["mamba_d_head"] = values["mamba_expand"] * hidden // 4
    if _is_int(values.get("rotary_dim")) and _is_int(head_dim):
        out["rotary_dim"] = min(values["rotary_dim"], head_dim)


def _fit_mrope(config, overrides):
    """Models with M-RoPE split half the rotary part of a head into sections, and read default
    sections (sized for their default head) when the config has none: the shrunk config gets
    sections that fill its own head (two heads where four would leave fewer than three rotary
    pairs). Sub-configs too."""
    values = _values(config)
    keys = getattr(type(config), "ignore_keys_at_rope_validation", None) or ()
    rope = overrides.get("rope_parameters", values.get("rope_parameters"))
    flat = isinstance(rope, dict) and ("rope_type" in rope or "rope_theta" in rope)
    if flat and ("mrope_section" in keys or "mrope_section" in rope):
        get = (lambda n: overrides.get(n, values.get(n)))
        factor = rope.get("partial_rotary_factor") or get("partial_rotary_factor") or 1
        hidden, heads, head_dim = get("hidden_size"), get("num_attention_heads"), get("head_dim")
        if _is_int(hidden) and _is_int(heads) and heads and not _is_int(values.get("head_dim")):
            if int(hidden // heads * factor) // 2 < 3 and hidden // 2 * factor >= 6:
                overrides["num_attention_heads"] = heads = 2
            head_dim = hidden // heads
        if _is_int(head_dim) and int(head_dim * factor) // 2 >= 3:
            base = rope.get("mrope_section") or [2, 3, 3]
            overrides["rope_parameters"] = {**rope, "mrope_section": _sections(base, int(head_dim * factor) // 2)}
    for name in sub_config_names(config):
        if isinstance(overrides.get(name), dict):
            _fit_mrope(vars(config)[name], overrides[name])


def _sections(sections, total):
    """Scales a list of section sizes to sum to `total`, each at least 1."""
    whole = sum(sections) or 1
    out = [max(1, s * total // whole) for s in sections]
    out[-1] += total - sum(out)
    return out


def _backbone_outputs(config, out):
    """A ViT-style backbone whose layers were cut keeps as many layers as the stages its owner
    reads (a DPT neck reads four), each one of them an output."""
    indices = getattr(config, "out_indices", None)
    layer = next((n for n in _LAYERS if n in out), None)
    if not layer or not isinstance(indices, (list, tuple)) or not indices or not all(map(_is_int, indices)):
        return
    if max(indices) <= out[layer]:
        return
    count = len(indices)
    out[layer] = max(out[layer], count)
    out["out_indices"] = list(range(out[layer] - count + 1, out[layer] + 1))
    out["out_features"] = [f"stage{i}" for i in out["out_indices"]]
    out["stage_names"] = ["stem"] + [f"stage{i}" for i in range(1, out[layer] + 1)]


def _fill_derived(values, out):
    """Sizes a default config leaves None for a checkpoint to set, filled as the model would
    derive them: the head size from the width and heads, key/value heads as heads, a vocabulary."""
    get = (lambda n: out.get(n, values.get(n)))
    heads = next((n for n in _HEADS if _is_int(values.get(n))), None)
    if "head_dim" in values and values["head_dim"] is None and heads and _is_int(get("hidden_size")):
        out["head_dim"] = get("hidden_size") // get(heads)
    for kv in _KV_HEADS:
        if kv in values and values[kv] is None and heads:
            out[kv] = get(heads)
    if "vocab_size" in values and values["vocab_size"] is None:
        out["vocab_size"] = 128
        if "pad_token_id" in values and values["pad_token_id"] is None:
            out["pad_token_id"] = 1
    if "moe_intermediate_size" in values:  # a MoE config whose expert counts a checkpoint sets
        for name in _EXPERTS:
            if name in values and values[name] is None:
                out[name] = 4
    if any(_is_int(get(n)) for n in _EXPERTS):
        for name in ("num_experts_per_tok", "num_experts_per_token"):
            if name in values and values[name] is None:
                out[name] = 2
    for name in ("attn_layer_indices", "attention_layer_indices"):
        if name in values and values[name] is None:
            out[name] = [1]  # a hybrid with no attention layer keeps no cache its model can read
    if "prediction_length" in values and values["prediction_length"] is None:
        out["prediction_length"] = 4  # time-series transformers need a horizon
    if _is_int(values.get("num_kv_shared_layers")) and values["num_kv_shared_layers"]:
        out["num_kv_shared_layers"] = 0  # two layers leave no room to share caches


def _layer_picks(values, count):
    """The two layer indices every per-layer list keeps: the first layer and the first layer of
    another kind in the config's main layer-kind list (layer_types, layers_block_type, ...; a
    list of MLP kinds last), else the second layer."""
    kinds = [(("mlp" in n or "moe" in n), n) for n, v in values.items()
             if (isinstance(v, list) or isinstance(v, str) and ("types" in n or "pattern" in n))
             and len(v) == count and ("type" in n or "pattern" in n)]
    for _, name in sorted(kinds):
        value = values[name]
        other = next((i for i, x in enumerate(value) if x != value[0]), None)
        if other is not None:
            return [0, other]
    return [0, 1]


def _per_layer(config, values, out, strategy):
    """Cuts per-layer lists, patterns and per-layer configs to the same two layers."""
    layers = [values[n] for n in _LAYERS if _is_int(values.get(n))]
    if not layers or layers[0] <= 2:
        return
    count = layers[0]
    picks = _layer_picks(values, count)
    for name, value in values.items():
        if isinstance(value, str) and "pattern" not in name and "types" not in name:
            continue  # a word as long as the layer count (attention_type "block_sparse")
        if isinstance(value, (list, str)) and len(value) == count and (
                "layer" in name or "pattern" in name or "type" in name):
            kept = [value[i] for i in picks]
            out[name] = "".join(kept) if isinstance(value, str) else kept
    typed = any(isinstance(v, list) and len(v) == count and ("type" in n or "pattern" in n)
                for n, v in values.items())
    for name, value in values.items():
        if typed or not isinstance(value, list) or not value or not all(map(_is_int, value)):
            continue
        if ("indices" in name or "layers_idx" in name or name.endswith("_layer_ids")) and \
                all(0 <= v < count for v in value) and len(value) < count:
            out[name] = [1]  # hybrids: the layers of the other kind (attention) sit at index 1
    for name, value in values.items():  # ... or every `period` layers from `offset`
        if name.endswith("_period") and _is_int(value) and value > 2:
            out[name] = 2
            offset = name[:-len("period")] + "offset"
            if _is_int(values.get(offset)):
                out[offset] = 1
        elif isinstance(value, list) and 2 < len(value) < count and (
                "types" in name or "pattern" in name) and len(set(map(str, value))) > 1:
            # A cycle of layer kinds (repeated over the layers): the first two layers keep two kinds.
            out[name] = [value[0], next(x for x in value[1:] if x != value[0])]
    spec = vars(config).get("_heterogeneity_spec")
    if spec is not None and spec.per_layer_overrides:
        # A heterogeneous config keeps one layer of its own kind, as layer 1, shrunk like the rest.
        index, layer = next(iter(sorted(spec.per_layer_overrides.items())))
        shrunk = dict(layer)
        table = _SHRINK if strategy == "tiny" else _LAYERS_ONLY
        for target, names in table.items():
            for name in names:
                if _is_int(shrunk.get(name)) and shrunk[name] > target:
                    shrunk[name] = target
        for name, value in layer.items():  # a per-layer width keeps its ratio to the global one
            if _is_int(value) and _is_int(values.get(name)) and _is_int(out.get(name)) and values[name]:
                shrunk[name] = max(1, out[name] * value // values[name])
        out["per_layer_config"] = {1: shrunk}


def _remap_token_ids(values, vocab):
    """Moves special token ids that fall outside a tiny vocabulary to its top ids."""
    out, free = {}, iter(range(vocab - 1, vocab - 1 - SPECIAL_ROOM, -1))
    seen = {}

    def fit(token):
        """Returns the tiny-vocabulary id for one special token id."""
        if not _is_int(token) or token < vocab - SPECIAL_ROOM:
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


def _substitute_timm(config_class, overrides, values):
    """A timm backbone (timm does not load here) becomes transformers' own ResNet, where the
    model takes a backbone config."""
    timm = values.get("backbone_config")
    if type(timm).__name__ != "TimmBackboneConfig":
        return
    from transformers import ResNetConfig
    indices = list(getattr(timm, "out_indices", None) or (1, 2, 3, 4))
    overrides["backbone_config"] = ResNetConfig(
        out_indices=indices, embedding_size=16, hidden_sizes=[16, 32, 64, 128][:max(indices)] or [16],
        depths=[1] * max(max(indices), 1), layer_type="basic")
    if "use_timm_backbone" in values:
        overrides["use_timm_backbone"] = False


def tiny_config(config_class, strategy="tiny"):
    """Returns config_class built with defaults, then shrunk by a strategy (shrink_overrides)."""
    default = config_class()
    if strategy == "default":
        return default
    values = _values(default)
    overrides = shrink_overrides(default, strategy)
    if strategy == "tiny":
        _fit_mrope(default, overrides)
    _substitute_timm(config_class, overrides, values)
    try:
        return config_class(**overrides)
    except Exception:  # noqa: BLE001  (some configs reject re-init; set attributes instead)
        config = copy.deepcopy(default)
        _apply(config, overrides)
        return config


def _apply(config, overrides):
    """Sets overrides on a config object, recursing into sub-config dicts."""
    for name, value in overrides.items():
        current = vars(config).get(name)
        if isinstance(value, dict) and hasattr(current, "to_dict"):
            _apply(current, {k: v for k, v in value.items() if vars(current).get(k, v) != v})
        else:
            setattr(config, name, value)


def check_config(config):
    """Returns the invariants a shrunk config breaks (empty when none): widths that its heads do
    not divide, key/value heads that do not divide the heads, per-layer lists of another length
    than the layers, M-RoPE sections that do not fill half a head; sub-configs too."""
    problems = []
    values = _values(config)
    hidden = values.get("hidden_size")
    heads = values.get("num_attention_heads")
    if _is_int(hidden) and _is_int(heads) and heads and not _is_int(values.get("head_dim")) \
            and hidden % heads:
        problems.append(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    kv = next((values[n] for n in _KV_HEADS if _is_int(values.get(n))), None)
    if _is_int(heads) and kv and heads % kv:
        problems.append(f"{kv} key/value heads do not divide {heads} heads")
    layers = next((values[n] for n in _LAYERS if _is_int(values.get(n))), None)
    for name in ("layer_types", "layers_block_type"):
        if layers and isinstance(values.get(name), list) and len(values[name]) != layers:
            problems.append(f"{name} has {len(values[name])} entries for {layers} layers")
    rope = values.get("rope_parameters")
    head_dim = values.get("head_dim") or (hidden // heads if _is_int(hidden) and _is_int(heads) and heads else None)
    if isinstance(rope, dict) and isinstance(rope.get("mrope_section"), list) and _is_int(head_dim):
        rotary = int(head_dim * (rope.get("partial_rotary_factor") or values.get("partial_rotary_factor") or 1))
        if sum(rope["mrope_section"]) * 2 != rotary:
            problems.append(f"mrope_section {rope['mrope_section']} does not fill {rotary} rotary dims")
    for name in sub_config_names(config):
        problems += [f"{name}: {p}" for p in check_config(vars(config)[name])]
    return problems
