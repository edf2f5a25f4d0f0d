"""The CPU reference of one model type: walk shrink.py's strategies from tiny to less tiny; for
each, check the shrunk config, weigh the model on the meta device, build it, and run the CPU
forward on inputs.py's candidates, then (for a sub-model type) on the arguments its parent gives
it (submodel.py). The first strategy that builds and runs wins; every failed try is recorded.

A model that needs a package this environment lacks (timm, natten, scipy, ...) is `unavailable`
with that reason, apart from build and reference failures."""

import re

from . import models
from .shrink import STRATEGIES, check_config


PARAMETER_BUDGET = 100_000_000  # a less tiny strategy whose model is larger is not built
_NEEDS = re.compile(r"requires the (\S+) library but it was not found|No module named '([^']+)'")


def first_line(exc):
    """Returns 'Type: first line of message' for an exception."""
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {text}".rstrip(": ")


def missing_package(reason):
    """The package a failure says is missing, or None."""
    found = _NEEDS.search(reason or "")
    return (found.group(1) or found.group(2)).split(".")[0] if found else None


class Prepared:
    """What prepare found: the model, config and inputs the CPU ran (None where it got no
    further), its outputs, the strategy that won, and every try with its failure."""

    def __init__(self):
        self.model = self.config = self.inputs = self.outputs = None
        self.strategy = None
        self.built_strategy = None  # the first strategy whose model built
        self.attempts = []  # [(strategy, stage, reason)]

    @property
    def reason(self):
        """The failure of the first try that got furthest (reference, else build)."""
        for stage in ("reference", "build", "check", "budget"):
            for strategy, st, why in self.attempts:
                if st == stage:
                    return f"{why} (shrink {strategy})" if len(self.attempts) > 1 else why
        return ""

    @property
    def unavailable(self):
        """The missing package that stopped every build, or None."""
        built = [a for a in self.attempts if a[1] in ("build", "reference")]
        needs = {missing_package(why) for _, stage, why in built if stage == "build"}
        if self.built_strategy is None and len(needs) == 1 and None not in needs:
            return needs.pop()
        return None


def run_forward(model, inputs):
    """Runs the CPU model on inputs with the sweep's seed; returns its output."""
    models._seed()
    return model(**inputs)


def _try_inputs(model, config, prep, strategy):
    """Runs the CPU model on each input candidate; True (prep filled in) on the first that runs."""
    cands, why = models.input_candidates(model, config)
    errors = [why] if why else []
    cands = list(cands)
    for inputs in cands:
        try:
            out = run_forward(model, inputs)
        except Exception as exc:  # noqa: BLE001
            errors.append(first_line(exc))
            cands += _retry_with_placeholders(str(exc), inputs, config, len(cands))
            continue
        prep.model, prep.config, prep.inputs, prep.outputs = model, config, inputs, out
        prep.strategy = strategy
        return True
    prep.attempts.append((strategy, "reference", "CPU reference forward raised " + (
        errors[0] if errors else "(no inputs)")))
    return False


_PLACEHOLDERS = re.compile(r"(Image|Video|Audio) features and \w+ tokens do not match[,:] tokens: (\d+), "
                           r"features:? (\d+)")


def _retry_with_placeholders(message, inputs, config, tried):
    """A multimodal model that counted N features and no placeholder tokens for them gets one
    more candidate with N placeholders (at most 3 such retries)."""
    found = _PLACEHOLDERS.search(message)
    if not found or tried > 12:
        return []
    more = models.with_placeholders(inputs, config, int(found.group(3)), found.group(1).lower())
    return [more] if more is not None else []


def _try_submodel(model_type, class_name, names, prep, strategy):
    """Runs the sub-model on the arguments its parent gives it; True on success."""
    from .submodel import capture_inputs
    try:
        sub, config, inputs, parent = capture_inputs(model_type, class_name, strategy, names)
        out = run_forward(sub, inputs)
    except Exception as exc:  # noqa: BLE001
        prep.attempts.append((strategy, "reference", "inputs captured from the parent model: " + first_line(exc)))
        return False
    prep.model, prep.config, prep.inputs, prep.outputs = sub, config, inputs, out
    prep.strategy = f"{strategy}, inputs from {parent}"
    return True


def prepare(model_type, class_name=None, names=None):
    """Finds the first shrink strategy whose model builds and runs on the CPU; returns Prepared."""
    from .submodel import parents
    names = names or models.architectures()
    class_name = class_name or names.get(model_type)
    prep = Prepared()
    if class_name is None:
        raise LookupError(f"unknown model type {model_type!r}")
    is_sub = None
    for strategy in STRATEGIES:
        try:
            model, config = _build(model_type, class_name, strategy, prep)
        except Exception as exc:  # noqa: BLE001
            prep.attempts.append((strategy, "build", first_line(exc)))
            continue
        if model is None:
            continue
        prep.built_strategy = prep.built_strategy or strategy
        if _has_no_forward(model):  # generation-only or codec wrappers: no shrink changes that
            prep.attempts.append((strategy, "reference", f"{type(model).__name__} has no forward "
                                  "(only generate, encode or decode)"))
            return prep
        if _try_inputs(model, config, prep, strategy):
            return prep
        if is_sub is None:
            is_sub = bool(parents(model_type, names))
        if is_sub and _try_submodel(model_type, class_name, names, prep, strategy):
            return prep
    return prep


def _has_no_forward(model):
    """True for a model class that does not define forward (torch's placeholder raises)."""
    import torch
    return getattr(type(model).forward, "__name__", "") == torch.nn.Module.forward.__name__ == "_forward_unimplemented"


def _build(model_type, class_name, strategy, prep):
    """The config shrunk by a strategy, checked and weighed, and the model built from it;
    returns (model, config), or (None, None) with the reason in prep.attempts."""
    config = models.tiny_config(models.config_class(model_type), strategy)
    problems = check_config(config) if strategy != "default" else []
    if problems:
        prep.attempts.append((strategy, "check", "shrunk config breaks: " + "; ".join(problems[:3])))
        return None, None
    count = models.parameter_count(model_type, class_name, _copy(config))
    if isinstance(count, Exception):  # what the meta build raised, the real one would too
        if "meta" not in str(count) or strategy != "tiny":
            prep.attempts.append((strategy, "build", first_line(count)))
            return None, None
    elif strategy != "tiny" and count > PARAMETER_BUDGET:  # "tiny" is as small as it gets
        prep.attempts.append((strategy, "budget", f"{count / 1e6:.0f}M parameters (budget "
                              f"{PARAMETER_BUDGET / 1e6:.0f}M)"))
        return None, None
    models._seed()
    return models.model_class(model_type, class_name)(config).float().eval(), config


def _copy(config):
    """A deep copy of a config (a meta build may change the config it is given)."""
    import copy
    return copy.deepcopy(config)
