"""The sweep's `pretrained` column: save_pretrained, then from_pretrained(device_map="neuron",
dtype=torch.bfloat16), compared with the CPU's bfloat16 load (torchneuron/sweep/pretrained.py)."""

import warnings

import pytest
import torch
import transformers  # noqa: F401  (make test installs it: a broken install fails, never skips)

from torchneuron import sweep
from torchneuron.sweep import pretrained


@pytest.fixture(scope="module")
def llama():
    """The sweep's tiny Llama with its CPU reference."""
    prep = sweep.prepare("llama")
    return prep.model, prep.inputs, sweep.float_outputs(prep.outputs)


def _row():
    return sweep._record("llama", "LlamaModel")


def test_tiny_llama_loads_on_neuron_in_bf16_and_matches_cpu_bf16(llama):
    model, inputs, expected = llama
    row = _row()
    pretrained.run_pretrained(model, inputs, expected, row)
    assert row["pretrained"] == "pass", row["reasons"]
    assert row["pretrained_max_err"] is not None and row["pretrained_max_err"] <= 0.05


def test_a_wrong_neuron_kernel_is_a_mismatch(llama):
    """rsqrt (Llama's RMSNorm) on neuron replaced by a wrong kernel: the column must catch it."""
    model, inputs, expected = llama
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # "Overriding a previously registered kernel"
        warnings.simplefilter("ignore")
        lib.impl("rsqrt", lambda x: (x.cpu().rsqrt() * 1.25).to(x.device), "PrivateUse1")
    try:
        row = _row()
        pretrained.run_pretrained(model, inputs, expected, row)
    finally:
        lib._destroy()
    assert row["pretrained"] == "mismatch", row
    assert "elements differ (bfloat16)" in row["reasons"]["pretrained"]
    row = _row()  # the real kernel is back
    pretrained.run_pretrained(model, inputs, expected, row)
    assert row["pretrained"] == "pass", row["reasons"]


def test_bf16_comparison_excuses_only_what_cpu_rounds_as_badly():
    exp32 = {"out": torch.tensor([1.0, 100.0, 10.0])}
    cpu = {"out": torch.tensor([1.0, 104.0, 10.0]).to(torch.bfloat16)}  # CPU bf16 4 off at 100
    closer = {"out": torch.tensor([1.0, 100.0, 10.0]).to(torch.bfloat16)}  # 0 from float32
    assert pretrained.compare_bf16(closer, cpu, exp32)[0] is None
    # 7 off float32 at 10, where the CPU is exact: within twice the CPU's largest error (4).
    drifted = {"out": torch.tensor([1.0, 104.0, 17.0]).to(torch.bfloat16)}
    assert pretrained.compare_bf16(drifted, cpu, exp32)[0] is None
    further = {"out": torch.tensor([1.0, 112.0, 19.0]).to(torch.bfloat16)}  # 12 and 9 off
    why, worst = pretrained.compare_bf16(further, cpu, exp32)
    assert why == "out: 2/3 elements differ (bfloat16)" and worst == 9.0
    assert pretrained.compare_bf16(drifted, cpu, {})[0] == "out: 1/3 elements differ (bfloat16)"
    within = {"out": torch.tensor([1.01, 104.0, 10.0]).to(torch.bfloat16)}  # within 1.6e-2 of CPU
    assert pretrained.compare_bf16(within, cpu, {})[0] is None


def test_a_failing_cpu_side_is_the_harness_and_a_plain_module_is_na():
    class NotSaved(torch.nn.Module):
        def save_pretrained(self, folder):
            raise OSError("disk full")

    row = _row()
    pretrained.run_pretrained(NotSaved(), {}, {}, row)
    assert row["pretrained"] == "skipped"
    assert row["reasons"]["pretrained"] == "no CPU bfloat16 reference: OSError: disk full"
    row = _row()
    pretrained.run_pretrained(torch.nn.Linear(2, 2), {}, {}, row)
    assert row["pretrained"] == "n/a"


def test_a_model_split_over_two_neuron_devices_matches_cpu_bf16(llama, tmp_path):
    """device_map places layers on neuron:0 and neuron:1; accelerate's hooks move activations
    between them, and the output matches the CPU's bfloat16 load."""
    model, inputs, expected = llama
    model.save_pretrained(tmp_path)
    cls, inputs = type(model), pretrained._bf16(inputs)
    reference = pretrained._forward(cls.from_pretrained(tmp_path, dtype=torch.bfloat16), inputs)
    split = {"embed_tokens": 0, "layers.0": 1, "layers.1": 0, "norm": 1, "rotary_emb": 1}
    neuron = cls.from_pretrained(tmp_path, device_map=split, dtype=torch.bfloat16)
    assert {str(p.device) for p in neuron.layers[0].parameters()} == {"neuron:1"}
    assert {str(p.device) for p in neuron.embed_tokens.parameters()} == {"neuron:0"}
    out = pretrained._forward(neuron, sweep.inputs.moved(inputs, "neuron"))
    assert pretrained.compare_bf16(out, reference, expected)[0] is None
