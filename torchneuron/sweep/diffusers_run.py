"""Running one diffusers class (a row of `--corpus diffusers`): the CPU reference from
diffusers_models.prepare, then run.py's device columns, with a `pretrained` column for
diffusers' own loader: save_pretrained, then from_pretrained(dir, device_map="neuron",
torch_dtype=torch.bfloat16) against the CPU's bfloat16 load of the same checkpoint."""

import time

from . import pretrained
from .run import COLUMNS, SweepRunner, _finish, _record, _set, run_device_columns


def run_pretrained(cpu_model, inputs, expected, row):
    """Fills the row's `pretrained` column with diffusers' save_pretrained / from_pretrained."""
    pretrained.run_pretrained(cpu_model, inputs, expected, row, dtype_argument="torch_dtype")


def run_class(name, classes=None, skip=()):
    """Runs one diffusers model class: the CPU reference, then the device columns; its row."""
    from . import diffusers_models
    start = time.monotonic()
    classes = classes or diffusers_models.model_classes()
    row = _record(name, name)
    if name not in classes:
        _set(row, "reference", "skipped", f"diffusers exports no model class {name!r}")
        prep = None
    else:
        prep = diffusers_models.prepare(name, classes[name])
        row["built"] = prep.built_strategy is not None
        row["strategy"] = prep.strategy or prep.built_strategy
        row["shrink_attempts"] = [f"{s} ({stage}): {why[:200]}" for s, stage, why in prep.attempts]
        if prep.inputs is not None:
            _set(row, "reference", "pass")
        elif not row["built"]:
            _set(row, "reference", "error", "tiny model could not be built on CPU: " + prep.reason)
        else:
            _set(row, "reference", "error", prep.reason)
    if prep is None or prep.inputs is None:
        for column in COLUMNS:
            _set(row, column, "skipped", "no CPU reference: " + row["reasons"]["reference"][:200])
        return _finish(row, start)
    # Gradients of a whole VAE or DiT from the output sum are long float32 sums: a column that
    # misses atol = rtol = 1e-4 passes where neuron is within twice the CPU's own distance from
    # float64 (row["float64_accepted"] names it).
    return run_device_columns(row, prep.model, prep.inputs, prep.outputs, start, run_pretrained, skip,
                              accept_rounding=True)


class DiffusersRunner(SweepRunner):
    """The sweep's task runner for `--corpus diffusers`: one task is one model class (a failed
    task's row is SweepRunner's). `skip`: device columns not to run."""

    def __init__(self, skip=()):
        self.skip = tuple(skip)

    def setup(self):
        """Prepares a fresh worker: offline, quiet, one compute thread, silent fallbacks."""
        import warnings
        from .models import _set_offline
        _set_offline()
        warnings.simplefilter("ignore")
        import torch
        import torchneuron
        torch.set_num_threads(1)
        torchneuron.set_fallback_mode("silent")
        import diffusers
        diffusers.utils.logging.set_verbosity_error()
        diffusers.utils.logging.disable_progress_bar()
        from .diffusers_models import model_classes
        self.classes = model_classes()

    def run(self, task):
        """Runs one model class and returns its row."""
        return run_class(task, self.classes, self.skip)
