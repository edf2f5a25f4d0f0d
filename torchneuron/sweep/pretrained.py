"""The sweep's sixth column, `pretrained`: loading as users load. The tiny CPU model is saved with
save_pretrained (safetensors) and loaded back with from_pretrained(dir, device_map="neuron",
dtype=torch.bfloat16); its forward is compared with the same checkpoint loaded on the CPU in
bfloat16, on the same inputs (floating inputs in bfloat16 too)."""

import tempfile

from .inputs import moved
from .models import _seed
from .reference import first_line

# bfloat16 keeps 8 significant bits: 1.6e-2 is two units in the last place, torch.testing's rtol.
BF16_ATOL = BF16_RTOL = 1.6e-2


def _bf16(value):
    """A value with every floating tensor (in lists, tuples and dicts too) in bfloat16."""
    import torch
    if isinstance(value, torch.Tensor):
        return value.to(torch.bfloat16) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_bf16(v) for v in value)
    if isinstance(value, dict):
        return {k: _bf16(v) for k, v in value.items()}
    return value


def _forward(model, inputs):
    """The model's floating outputs under no_grad, seeded as the sweep seeds every run."""
    import torch
    from .run import float_outputs
    _seed()
    with torch.no_grad():
        return float_outputs(model(**inputs))


def _off_neuron(model):
    """Names of the parameters and buffers from_pretrained did not put on neuron."""
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    return [n for n, t in tensors if t.device.type != "neuron"]


def compare_bf16(actual, expected, float32):
    """Compares neuron's bfloat16 outputs with the CPU's; returns (None or reason, max abs error).
    An element outside the bfloat16 tolerance still passes when neuron's distance there from the
    float32 model's output is at most twice the CPU's largest on that tensor: through a deep model
    two bfloat16 runs drift apart as far as each drifts from float32 (swin: both 0.05 off at most,
    0.009 on average), while a wrong kernel lands far outside that."""
    from .run import compare_tensors, within_cpu_rounding

    return compare_tensors(actual, expected, BF16_ATOL, BF16_RTOL, within_cpu_rounding(float32), " (bfloat16)")


def run_pretrained(cpu_model, inputs, expected, row, dtype_argument="dtype"):
    """Fills the row's `pretrained` column: save, reload on neuron in bfloat16, forward, compare
    with the CPU bfloat16 load. A failure before the neuron load (save, CPU load or CPU forward)
    is the harness's: skipped with its reason. `expected` are the float32 CPU outputs;
    `dtype_argument` is from_pretrained's name for the dtype (diffusers': torch_dtype)."""
    import torch
    from .run import _set
    if not hasattr(cpu_model, "save_pretrained"):
        _set(row, "pretrained", "n/a", f"{type(cpu_model).__name__} is not a PreTrainedModel")
        return
    cls, inputs = type(cpu_model), _bf16(inputs)
    with tempfile.TemporaryDirectory(prefix="sweep-pretrained-") as folder:
        try:
            cpu_model.save_pretrained(folder)
            reference = _forward(cls.from_pretrained(folder, **{dtype_argument: torch.bfloat16}), inputs)
        except Exception as exc:  # noqa: BLE001 - the harness's failure, not the device's
            _set(row, "pretrained", "skipped", "no CPU bfloat16 reference: " + first_line(exc))
            return
        try:
            model = cls.from_pretrained(folder, device_map="neuron", **{dtype_argument: torch.bfloat16})
            left = _off_neuron(model)
            if left:
                raise RuntimeError(f"from_pretrained left {len(left)} tensors off neuron: {left[:3]}")
            out = _forward(model, moved(inputs, "neuron"))
            torch.neuron.synchronize()
        except Exception as exc:  # noqa: BLE001
            _set(row, "pretrained", "error", first_line(exc))
            return
    why, row["pretrained_max_err"] = compare_bf16(out, reference, expected)
    _set(row, "pretrained", "mismatch" if why else "pass", why or "")
