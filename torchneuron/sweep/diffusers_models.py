"""The diffusers corpus of the sweep: every ModelMixin class that `diffusers` exports, built tiny
from its __init__ defaults (random weights, nothing downloaded) and run on the CPU on inputs made
from its forward signature and config. prepare() walks a shrink ladder ("tiny", "heads",
"layers", "default") until one model builds and runs; diffusers_run.py runs the device columns.

Shrinking is generic, by parameter name and value: layer and block counts to 1; head counts to
2, with every width tied to them (hidden sizes, the inner dim heads x head dim wherever it
recurs) scaled by the same ratio, so head dims and rotary axes stay valid; channel tuples to 32
(a multiple of the norm groups); text and conditioning input dims to 32; sample sizes to 32."""

import inspect
import re

from .models import _seed
from .reference import first_line

BATCH, TEXT = 2, 8
PARAMETER_BUDGET = 100_000_000
STRATEGIES = ("tiny", "narrow", "heads", "layers", "default")
# Sizes a class needs that no rule derives (lists whose meaning only its code knows).
_CLASS_SIZES = {
    "ZImageControlNetModel": {"control_layers_places": [0], "control_refiner_layers_places": [0]},
    "HiDreamImageTransformer2DModel": {"caption_channels": [32, 32], "llama_layers": [0]},
}
_NONE_SIZE = re.compile(r"(channels|_dim|^sample_size)$")


def _none_sizes(defaults, overrides):
    """Every None-defaulted size a model turned out to need: output channels as the input's, other
    channels and dims and the sample size 32."""
    out = {}
    for name, value in defaults.items():
        if value is None and name not in overrides and _NONE_SIZE.search(name):
            same = overrides.get("in_channels", defaults.get("in_channels"))
            out[name] = same if name == "out_channels" and _int(same) else 32
    return out


# Wrappers over a list of models (Multi*ControlNet, MultiAdapter) and models whose constructor
# needs non-default objects are built only when every required argument has a default.
_LAYERS = re.compile(r"(layers|blocks|depth|^n_layer|^nlayers)$|layers_per_(block|mid_block|down_block|up_block)$")
_HEADS = re.compile(r"(^|_)(num_)?(attention_|attn_|cross_attention_|key_value_|kv_|trans_)?heads?$|^n_heads$|^nheads$|^n_head$|^n_kv_heads$|^num_kv_heads$|^num_key_value_attention_heads$")
_KV = re.compile(r"kv|key_value")
_WIDTH = re.compile(r"^(hidden_size|dim|model_dim|d_model|n_embd|embed_dim|inner_dim|hidden_dim|model_channels|dit_dim|"
                    r"token_dim|time_embed_dim|adaln_dim|caption_projection_dim|out_dim)$")
_FFN = re.compile(r"intermediate|ffn|ff_dim|ff_inner|d_ff|n_inner|mlp_dim|hidden_dim")
_INPUT_DIM = re.compile(r"(text|caption|joint|pooled|cross_attention|context|cap_feat|encoder_hid|clip|t5|llama|llm|"
                        r"cond|redux|txt|siglip|image_embed|embedding_dim|prompt|lyric|timbre)\w*(dim|channels|size)")
_CHANNELS = re.compile(r"(channels|^ch$|^base_dim$|^dim$|^encoder_dim$|^dec_dim$|^enc_dim$)")
_SAMPLE = re.compile(r"^(sample_size|sample_height|sample_width|resolution|image_size|base_height|base_width)$")
_NARROW = re.compile(r"(dim|channel|channels)$")
_NOT_NARROW = re.compile(r"^(in|out|input|output|num|z|sample|latent|patch|head|attention_head)_|head_dim|^latent_channels$")
_PAD_ID = re.compile(r"^pad(ding)?_(token_)?(id|idx|index)$")
_VOCAB = re.compile(r"vocab_size|codebook_size|num_vq_embeddings|num_embeds_ada_norm|num_class_embeds")


def model_classes():
    """Returns {class name: class} for every ModelMixin subclass diffusers exports."""
    import diffusers
    from diffusers import ModelMixin
    found = {}
    for name in sorted(dir(diffusers)):
        if name.startswith("_"):
            continue
        try:
            obj = getattr(diffusers, name)
        except Exception:  # noqa: BLE001 - a lazily imported class that cannot load
            continue
        if inspect.isclass(obj) and issubclass(obj, ModelMixin) and obj is not ModelMixin:
            found[name] = obj
    return found


def init_defaults(cls):
    """The constructor's parameters with their defaults; raises TypeError for one without."""
    params = inspect.signature(cls.__init__).parameters.values()
    missing = [p.name for p in params if p.default is inspect.Parameter.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"]
    if missing:
        raise TypeError(f"{cls.__name__}.__init__ needs {', '.join(missing)} (no default)")
    return {p.name: p.default for p in params if p.name != "self"
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value):
    return isinstance(value, (list, tuple)) and value and all(_int(v) for v in value)


def _scaled(value, ratio, multiple=1):
    """value x ratio when that is a whole multiple of `multiple`, else None."""
    new = value * ratio
    if new == int(new) and int(new) >= 1 and int(new) % multiple == 0:
        return int(new)
    return None


# Sizes some classes default to None though the constructor cannot do without them.
_NONE_FILLED = {"in_channels": 4, "patch_size": 2, "num_layers": 1, "num_kv_heads": 2,
                "num_key_value_heads": 2}
# ...of which these are also a mode when None (a VAE without patchify): filled only when the
# model cannot be built without them.
_NONE_IF_BUILDS = ("patch_size",)
# Sizes a class needs that no rule derives (lists whose meaning only its code knows).
_CLASS_SIZES = {
    "ZImageControlNetModel": {"control_layers_places": [0], "control_refiner_layers_places": [0]},
    "HiDreamImageTransformer2DModel": {"caption_channels": [32, 32], "llama_layers": [0]},
}
_NONE_SIZE = re.compile(r"(channels|_dim|^sample_size)$")


def _none_sizes(defaults, overrides):
    """Every None-defaulted size a model turned out to need: output channels as the input's, other
    channels and dims and the sample size 32."""
    out = {}
    for name, value in defaults.items():
        if value is None and name not in overrides and _NONE_SIZE.search(name):
            same = overrides.get("in_channels", defaults.get("in_channels"))
            out[name] = same if name == "out_channels" and _int(same) else 32
    return out


# Wrappers over a list of child models: the constructor argument, the inputs zipped with the
# children (each made a one-element list), and the child class where it is not the name less "Multi".
_CHILDREN_ARGS = ("controlnets", "adapters")
_PER_CHILD = ("controlnet_cond", "controlnet_mode", "conditioning_scale", "xs")
_CHILD_CLASS = {"MultiAdapter": "T2IAdapter"}


def _shrink_layers(name, value):
    """Layer and block counts to 1 (0 stays 0)."""
    if _LAYERS.search(name) and "type" not in name and "places" not in name:
        if _ints(value) and 0 in value and list(value) == sorted(set(value)):  # layer indices
            return type(value)(v for v in value if v < 1)
        if _int(value) and value > 1:
            return 1
        if _ints(value):
            return type(value)(min(v, 1) for v in value)
    return value


def _head_ratio(defaults):
    """(old heads, new heads) of the main head count."""
    for name in ("num_attention_heads", "num_heads", "n_heads", "nheads", "n_head", "heads"):
        value = defaults.get(name)
        if _int(value) and value > 2:
            return value, 2
    return None, None


def shrink(defaults, strategy):
    """The constructor overrides of a strategy (a dict of the changed parameters)."""
    if strategy == "default":
        return {}
    out = {name: value for name, value in _NONE_FILLED.items() if name in defaults and defaults[name] is None}
    if "in_channels" in out and _int(defaults.get("norm_num_groups")):  # channels the norm can split
        out["in_channels"] = defaults["norm_num_groups"]
    for name, value in defaults.items():
        new = _shrink_layers(name, value)
        if new != value:
            out[name] = new
    if strategy == "layers":
        return out
    old_heads, new_heads = _head_ratio(defaults)
    unet = "block_out_channels" in defaults
    ratio = new_heads / old_heads if old_heads else None
    head_dim = next((defaults[n] for n in ("attention_head_dim", "head_dim", "dim_heads")
                     if _int(defaults.get(n))), None)
    inner = old_heads * head_dim if old_heads and head_dim else None
    for name, value in defaults.items():
        if name in out or not _int(value):
            continue
        if _HEADS.search(name) and "dim" not in name and value > 2:
            if unet:  # a UNet's heads split 32 channels
                out[name] = 8 if value >= 8 else value
            elif _KV.search(name):
                out[name] = 1
            else:
                out[name] = 2
        elif ratio and (value == inner or _WIDTH.match(name)) and value > 64:
            out[name] = _scaled(value, ratio, 2) or value
        elif ratio and _FFN.search(name) and value > 64:
            out[name] = max(64, (_scaled(value, ratio) or value) // 32 * 32)
    if strategy == "heads":
        return out
    if strategy == "narrow":  # tiny, over the budget: every remaining width an eighth
        out = {**shrink(defaults, "tiny"), **out}
        for name, value in defaults.items():
            if name not in out and _NARROW.search(name) and not _NOT_NARROW.search(name) and _int(value) and value >= 128:
                out[name] = max(16, value // 8 // 16 * 16)
        return out
    for name, value in defaults.items():
        if name in out:
            continue
        if _SAMPLE.match(name) and _int(value) and value > 32:
            out[name] = 32
        elif _SAMPLE.match(name) and _ints(value):
            out[name] = type(value)(min(v, 32) for v in value)
        elif _VOCAB.search(name) and _int(value) and value > 128:
            out[name] = 128
        elif _PAD_ID.search(name) and _int(value) and value >= 128:  # inside the shrunk vocabulary
            out[name] = 0
        elif _INPUT_DIM.search(name) and _int(value) and value > 64 and value != inner:
            out[name] = 32
        elif unet and name == "attention_head_dim" and _int(value) and value > 8:  # heads, in UNets
            out[name] = 8
        elif unet and name == "attention_head_dim" and _ints(value):
            out[name] = type(value)(min(v, 8) for v in value)
        elif _CHANNELS.search(name) and "in_channels" not in name and "out_channels" != name:
            if _ints(value) and max(value) > 32 and "latent" not in name:
                out[name] = type(value)(min(v, 32) for v in value)
            elif _int(value) and value > 32 and not ratio and "latent" not in name and not name.startswith("z"):
                out[name] = 32
        elif name == "norm_num_groups" and _int(value) and 32 % value:
            out[name] = 8
    out.update(_two_levels(defaults, out))
    return out


def _two_levels(defaults, out):
    """A UNet's or ControlNet's levels cut to 2: the first two down blocks, the last two up
    blocks, and every per-level tuple of the same length cut with them."""
    down, up = defaults.get("down_block_types"), defaults.get("up_block_types")
    if not isinstance(down, (list, tuple)) or len(down) <= 2:
        return {}
    levels = len(down)
    cut = {"down_block_types": type(down)(down[:2])}
    if isinstance(up, (list, tuple)) and len(up) == levels:
        cut["up_block_types"] = type(up)(up[-2:])
    for name, value in defaults.items():
        value = out.get(name, value)
        if name not in cut and isinstance(value, (list, tuple)) and len(value) == levels and "type" not in name:
            cut[name] = type(value)(value[-2:] if name.startswith("reverse") else value[:2])
    return cut


def _build(cls, defaults, strategy):
    """Builds a strategy's model on the meta device (to weigh it), then on the CPU; returns
    (model, overrides) or raises."""
    import torch
    overrides = shrink(defaults, strategy)
    overrides.update(_CLASS_SIZES.get(cls.__name__, {}) if strategy != "default" else {})
    lazy = {n for n in overrides if n in _NONE_IF_BUILDS and defaults.get(n) is None}
    try:
        with torch.device("meta"):
            weighed = cls(**{n: v for n, v in overrides.items() if n not in lazy})
        overrides = {n: v for n, v in overrides.items() if n not in lazy}
    except Exception:  # noqa: BLE001 - needs the filled sizes after all, and maybe more
        overrides = {**_none_sizes(defaults, overrides), **overrides}
        with torch.device("meta"):
            weighed = cls(**overrides)
    count = sum(p.numel() for p in weighed.parameters())
    if count > PARAMETER_BUDGET:
        raise MemoryError(f"{count / 1e6:.0f}M parameters (budget {PARAMETER_BUDGET / 1e6:.0f}M)")
    _seed()
    return cls(**overrides).float().eval(), overrides


class Prepared:
    """The CPU reference of one class: model, inputs and outputs where it ran, every try."""

    def __init__(self):
        self.model = self.inputs = self.outputs = self.strategy = self.built_strategy = None
        self.attempts = []  # [(strategy, stage, reason)]

    @property
    def reason(self):
        """The failure of the try that got furthest (reference, else build)."""
        for stage in ("reference", "build"):
            for strategy, st, why in self.attempts:
                if st == stage:
                    return f"{why} (shrink {strategy})"
        return ""


def prepare(name, cls=None):
    """Walks the shrink ladder until a model builds and runs on the CPU; returns Prepared."""
    from .diffusers_inputs import run_candidates
    cls = cls or model_classes()[name]
    prep = Prepared()
    try:
        defaults = init_defaults(cls)
    except TypeError as exc:
        arg = next((a for a in _CHILDREN_ARGS if a in inspect.signature(cls.__init__).parameters), None)
        if arg:
            return _prepare_wrapper(name, cls, arg, prep)
        prep.attempts.append(("default", "build", first_line(exc)))
        return prep
    if getattr(cls.forward, "__name__", "") == "_forward_unimplemented":
        prep.attempts.append(("default", "build", f"{name} has no forward"))
        return prep
    for strategy in STRATEGIES:
        if strategy == "narrow" and not (prep.attempts and prep.attempts[-1][2].startswith("MemoryError")):
            continue  # only for a tiny model over the budget
        try:
            model, _ = _build(cls, defaults, strategy)
        except Exception as exc:  # noqa: BLE001
            prep.attempts.append((strategy, "build", first_line(exc)))
            continue
        prep.built_strategy = prep.built_strategy or strategy
        found, why = run_candidates(model)
        if found is not None:
            prep.model, (prep.inputs, prep.outputs) = model, found
            prep.strategy = strategy
            return prep
        prep.attempts.append((strategy, "reference", "CPU reference forward raised " + why))
    return prep


def _prepare_wrapper(name, cls, arg, prep):
    """A Multi* wrapper over two copies of a tiny child model (else one), run on the child's inputs
    with each per-child input made a list of as many."""
    import copy

    import torch
    child_name = _CHILD_CLASS.get(name, name.replace("Multi", ""))
    child = prepare(child_name)
    if child.model is None:
        prep.attempts.append(("tiny", "build", f"its child {child_name} has no CPU reference: {child.reason}"))
        return prep
    params = inspect.signature(cls.forward).parameters
    first = next(n for n in params if n != "self")
    for count in (2, 1):  # MultiAdapter refuses one child, QwenImage's wrapper more than one
        inputs = {}
        for key, value in child.inputs.items():
            key = key if key in params else first  # the child's main input under the wrapper's name
            inputs[key] = [value] * count if key in _PER_CHILD else value
        for key in _PER_CHILD:
            if key in params and key not in inputs and params[key].default is inspect.Parameter.empty:
                inputs[key] = [1.0 if "scale" in key else torch.zeros(BATCH, dtype=torch.long)] * count  # mode ids
        try:
            children = [child.model] + [copy.deepcopy(child.model) for _ in range(count - 1)]
            model = cls(**{arg: children}).eval()
            _seed()
            prep.model, prep.inputs, prep.outputs = model, inputs, model(**inputs)
            prep.strategy = prep.built_strategy = child.strategy
            return prep
        except Exception as exc:  # noqa: BLE001
            prep.attempts.append((child.strategy, "reference", "CPU reference forward raised " + first_line(exc)))
    return prep
