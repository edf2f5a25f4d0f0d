"""The sweep's tiny models: each model type in transformers' auto mappings, its class (AutoModel's,
else the first task head's), its config built with defaults and shrunk by one of shrink.py's
strategies (nested sub-configs too), and the model built on the CPU with a fixed seed. The inputs
to try come from inputs.py; reference.py walks the shrink strategies until the CPU runs one."""

import os
import random

from .inputs import AUDIO_SAMPLES, BATCH, SEQ, input_candidates, with_placeholders  # noqa: F401
from .shrink import (STRATEGIES, check_config, shrink_overrides, sub_config_names,  # noqa: F401
                     tiny_config)


def _set_offline():
    """Keeps transformers and huggingface_hub off the network and quiet."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


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


def model_class(model_type, class_name=None):
    """Returns transformers' model class for a type (its AutoModel class by default)."""
    _set_offline()
    import transformers
    class_name = class_name or architectures().get(model_type)
    if class_name is None:
        raise LookupError(f"unknown model type {model_type!r}")
    if not hasattr(transformers, class_name):
        raise LookupError(f"transformers has no class {class_name} for {model_type!r}")
    return getattr(transformers, class_name)


def config_class(model_type):
    """Returns the config class of a model type."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    return CONFIG_MAPPING[model_type]


def build_model(model_type, class_name=None, strategy="tiny"):
    """Builds the seeded, eval-mode float32 CPU model of a type, its config shrunk by a strategy;
    returns (model, config)."""
    cls = model_class(model_type, class_name)
    config = tiny_config(config_class(model_type), strategy)
    _seed()
    model = cls(config)
    return model.float().eval(), config


def parameter_count(model_type, class_name, config):
    """The model's parameter count, built on the meta device (no memory and little time), or
    the exception that build raised."""
    import torch
    try:
        with torch.device("meta"):
            model = model_class(model_type, class_name)(config)
        return sum(p.numel() for p in model.parameters())
    except Exception as exc:  # noqa: BLE001 - the caller weighs it
        return exc


def _seed(seed=0):
    """Seeds Python, NumPy and torch."""
    import numpy
    import torch
    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)
