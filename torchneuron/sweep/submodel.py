"""Sub-models (`*_vision`, `*_text`, `*_encoder`, ... types) often take what only their parent
model makes: patch sequences with a grid, position ids, pre-computed hidden states. This builds
the parent model type whose config holds the sub-model's config, runs it on its own inputs with a
forward pre-hook on the submodule of the sub-model's class, and keeps that submodule and the
arguments it was called with: the sub-model row runs on exactly what its parent gives it."""

import inspect


class _Captured(Exception):
    """Raised by the pre-hook to stop the parent once the submodule's arguments are in hand."""


def _nested_classes(config_class, depth=2):
    """The config classes nested in a config class's sub_configs, `depth` levels down."""
    found = []
    for sub in (getattr(config_class, "sub_configs", None) or {}).values():
        if isinstance(sub, type):
            found.append(sub)
            if depth > 1:
                found += _nested_classes(sub, depth - 1)
    return found


def _stem(model_type):
    """The first word of a model type's name ('qwen2' of 'qwen2_5_vl_vision')."""
    return model_type.replace("-", "_").split("_")[0]


def parents(model_type, names):
    """The model types (with a model class in `names`) whose config nests this type's config,
    closest first: a type whose name begins the sub-model's comes first. Only types of the same
    family (the first word of the name) are looked at, so that few config modules are imported."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    target = CONFIG_MAPPING[model_type]
    found = []
    for parent in names:
        if parent == model_type or _stem(parent) != _stem(model_type):
            continue
        try:
            if target in _nested_classes(CONFIG_MAPPING[parent]):
                found.append(parent)
        except Exception:  # noqa: BLE001 - a config class we cannot read is no parent
            continue
    norm = model_type.replace("-", "_")
    return sorted(found, key=lambda p: (not norm.startswith(p.replace("-", "_")), len(p)))


def _find_submodule(parent_model, class_name, config_class):
    """The parent's submodule of the sub-model's class (else one built from its config class)."""
    for module in parent_model.modules():
        if type(module).__name__ == class_name:
            return module
    from transformers import PreTrainedModel
    for module in parent_model.modules():
        if module is not parent_model and isinstance(module, PreTrainedModel) and isinstance(
                getattr(module, "config", None), config_class):
            return module
    return None


def _detached(value):
    """Tensors detached and cloned (recursively in lists, tuples and dicts); the rest as is."""
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_detached(v) for v in value)
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    return value


def bind_arguments(forward, args, kwargs):
    """Turns a call's positional and keyword arguments into {parameter name: value}."""
    bound = inspect.signature(forward).bind_partial(*args, **kwargs)
    out = {}
    for name, value in bound.arguments.items():
        param = bound.signature.parameters[name]
        if param.kind is param.VAR_KEYWORD:
            out.update(value)
        elif param.kind is not param.VAR_POSITIONAL:
            out[name] = value
    return out


_FEATURES = ("get_image_features", "get_video_features", "get_audio_features", "get_text_features")


def _run_parent(parent_model, parent_config, seen):
    """Runs the parent forward on each input candidate, then its get_*_features methods (a
    multimodal model's towers run there without token ids that must match the features), until
    the hook has fired; returns the last failure."""
    import torch
    from . import models
    calls = [(parent_model, None, None)]
    for owner in (parent_model, getattr(parent_model, "model", None)):
        for name in _FEATURES:
            method = getattr(owner, name, None) if owner is not None else None
            if callable(method):
                params = [p for p in inspect.signature(method).parameters if p not in ("self", "kwargs")]
                calls.append((owner, method, params[:1]))
    why = "never called"
    for owner, method, main in calls:
        cands, reason = models.input_candidates(owner, parent_config, method, main)
        why = reason or why
        for inputs in cands:
            models._seed()
            try:
                with torch.no_grad():
                    (method or owner)(**inputs)
            except _Captured:
                return ""
            except Exception as exc:  # noqa: BLE001
                why = f"{type(exc).__name__}: {str(exc)[:100]}"
            if "args" in seen:
                return ""
    return why


def capture_inputs(model_type, class_name, strategy, names):
    """Builds a parent of the sub-model type by a shrink strategy, runs it, and returns
    (submodule, its config, {argument: value} it was called with, parent type); raises with
    the reason when no parent gets that far."""
    import torch
    from . import models
    errors = []
    for parent in parents(model_type, names)[:3]:
        try:
            parent_model, parent_config = models.build_model(parent, names[parent], strategy)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{parent}: build: {type(exc).__name__}")
            continue
        sub = _find_submodule(parent_model, class_name, models.config_class(model_type))
        if sub is None:
            errors.append(f"{parent}: no {class_name} inside")
            continue
        seen = {}

        def hook(module, args, kwargs):
            """Keeps the first call's arguments and stops the parent."""
            seen["args"] = bind_arguments(module.forward, args, kwargs)
            raise _Captured
        handle = sub.register_forward_pre_hook(hook, with_kwargs=True)
        try:
            why = _run_parent(parent_model, parent_config, seen)
        finally:
            handle.remove()
        if "args" in seen:
            config = getattr(sub, "config", None) or parent_config
            return sub, config, _detached(seen["args"]), parent
        errors.append(f"{parent}: {why or 'never called'}")
    raise RuntimeError("no parent model gave its inputs (" + ("; ".join(errors) or "no parent type") + ")")
