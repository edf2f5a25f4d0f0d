"""Tests for the transformers model sweep (torchneuron/sweep/)."""

import json
import os
import sys
from unittest import mock

import pytest
import transformers  # noqa: F401  (make test installs it: a broken install fails, never skips)

from conftest import run_in_new_group
from torchneuron import sweep

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env():
    """Environment for the tool's subprocess: repo on the path, quiet fallbacks, offline hub."""
    env = dict(os.environ)
    env["TORCHNEURON_FALLBACK"] = "silent"
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, env.get("PYTHONPATH", "")])
    return env


def test_two_tiny_models_pass_and_record_placement(tmp_path):
    out, md = tmp_path / "sweep.json", tmp_path / "sweep.md"
    cmd = [sys.executable, "-m", "torchneuron.sweep", "--models", "bert,gpt2", "--jobs", "1",
           "--output", str(out), "--markdown", str(md)]
    proc = run_in_new_group(cmd, 600, cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "[2/2]" in proc.stderr  # the progress line
    report = json.loads(out.read_text())
    rows = {r["model"]: r for r in report["models"]}
    assert set(rows) == {"bert", "gpt2"}
    for row in rows.values():
        assert row["load"] == "pass", row
        assert row["forward"] == "pass", row
        assert row["forward_max_err"] is not None and row["forward_max_err"] < sweep.ATOL
        assert row["backward"] == "pass", row  # a gradient mismatch is a wrong answer
        assert row["backward_max_err"] is not None
        # Placement is recorded as {aten op: calls}; these models may need no fallback at all.
        assert isinstance(row["fallback"], dict)
        assert all(n.startswith("aten::") and calls > 0 for n, calls in row["fallback"].items())
        # Compiled forward (no_grad) and compiled gradients match the CPU too.
        assert row["compile"] == "pass", row
        assert row["compile_backward"] == "pass", row
        assert row["compile_backward_max_err"] is not None
        assert row["graphs_compiled"] >= 3 and row["graphs_eager"] == 0, row
    assert report["totals"]["models"] == 2 and report["totals"]["built"] == 2
    text = md.read_text()
    assert "| bert |" in text and "| gpt2 |" in text and "Most used fallback ops" in text


def test_shrinker_shrinks_nested_text_config():
    from transformers import CLIPConfig
    config = sweep.tiny_config(CLIPConfig)
    for sub in (config.text_config, config.vision_config):
        assert sub.num_hidden_layers <= 2
        assert sub.hidden_size == 32
        assert sub.hidden_size % sub.num_attention_heads == 0
        assert sub.intermediate_size <= 64
    assert config.text_config.vocab_size <= 128
    assert config.text_config.max_position_embeddings <= 64
    assert config.vision_config.image_size == 32


def test_shrinker_keeps_head_dim_consistent_and_token_ids_in_vocab():
    from transformers import LlamaConfig
    config = sweep.tiny_config(LlamaConfig)
    assert config.num_hidden_layers == 2 and config.hidden_size == 32
    assert config.num_attention_heads % config.num_key_value_heads == 0
    assert config.head_dim * config.num_attention_heads == config.hidden_size
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        token = getattr(config, name)
        assert token is None or token < config.vocab_size


def test_shrinker_without_transformers_objects():
    class Config:
        sub_configs = {}

        def __init__(self):
            self.num_hidden_layers, self.hidden_size, self.vocab_size = 12, 768, 30522
            self.layer_types = ["full"] * 12
            self.eos_token_id, self.pad_token_id, self.use_cache = 30000, 0, True

    out = sweep.shrink_overrides(Config())
    assert out["num_hidden_layers"] == 2 and out["hidden_size"] == 32
    assert out["layer_types"] == ["full", "full"]
    assert out["vocab_size"] == 128 and out["eos_token_id"] == 127
    assert "pad_token_id" not in out and "use_cache" not in out


def test_unknown_model_type_is_skipped_with_reason():
    row = sweep.run_model("no_such_model_type")
    assert row["status"] == "skipped" and row["load"] == "skipped"
    assert "unknown model type" in row["reasons"]["load"]
    for column in ("forward", "backward", "compile"):
        assert row[column] == "skipped" and row["reasons"][column]


def test_model_that_fails_to_build_is_recorded():
    with mock.patch.object(sweep.models, "tiny_config", side_effect=ValueError("bad config")):
        row = sweep.run_model("bert")
    assert row["status"] == "skipped"
    assert row["reasons"]["load"].endswith("ValueError: bad config")
    assert row["time_s"] is not None


def test_failed_worker_row_is_an_error_with_reason():
    row = sweep.SweepRunner().failed("bert", "timeout after 1 s")
    assert row["status"] == "error" and row["model"] == "bert"
    assert all(row[c] == "error" and row["reasons"][c] == "timeout after 1 s"
               for c in sweep.COLUMNS)
    assert sweep.totals([row])["error"] == 1
    assert "timeout after 1 s" in sweep.markdown([row])


def test_compare_tensors_reports_mismatch_and_max_error():
    import torch
    expected = {"out.logits": torch.zeros(2, 3)}
    why, err = sweep.compare_tensors({"out.logits": torch.full((2, 3), 1e-6)}, expected)
    assert why is None and err == pytest.approx(1e-6)
    why, err = sweep.compare_tensors({"out.logits": torch.full((2, 3), 0.5)}, expected)
    assert "6/6 elements differ" in why and err == pytest.approx(0.5)
    why, _ = sweep.compare_tensors({}, expected)
    assert "missing on neuron" in why


def test_input_candidates_accept_several_main_inputs():
    # OneFormer names two main inputs (pixel values and task token ids); a name the sweep has no
    # generator for is a skip reason, not a crash.
    import torch
    from types import SimpleNamespace

    class TwoInputs(torch.nn.Module):
        main_input_name = ["pixel_values", "task_inputs"]

        def forward(self, pixel_values, task_inputs):
            return pixel_values

    config = SimpleNamespace(vocab_size=100, num_channels=3, image_size=32)
    cands, why = sweep.input_candidates(TwoInputs(), config)
    assert why == "" and set(cands[0]) == {"pixel_values", "task_inputs"}
    assert cands[0]["task_inputs"].dtype == torch.long and cands[0]["pixel_values"].dim() == 4

    TwoInputs.main_input_name = ["pixel_values", "point_coords"]
    cands, why = sweep.input_candidates(TwoInputs(), config)
    assert cands == [] and "point_coords" in why


class _TracesDifferently(__import__("torch").nn.Module):
    """Gives a different output under Dynamo than in eager mode, on any device."""

    def forward(self, input_values):
        import torch
        return {"out": input_values * 2 if torch.compiler.is_compiling() else input_values}


class _ScalesDifferently(__import__("torch").nn.Module):
    """Its gradient differs under Dynamo (the weight counts twice), on any device."""

    def __init__(self):
        import torch
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([1.0, 2.0]))

    def forward(self, input_values):
        import torch
        scale = 2 if torch.compiler.is_compiling() else 1
        return {"out": input_values * self.weight * scale}


def test_compile_mismatch_from_tracing_is_told_apart():
    import torch
    cpu_model = _TracesDifferently()
    inputs = {"input_values": torch.arange(6.0).reshape(2, 3)}
    expected = sweep.float_outputs(cpu_model(**inputs))
    row = sweep._record("fake", "_TracesDifferently")
    sweep._compile_run(_TracesDifferently().to("neuron"), cpu_model, inputs, expected, row)
    assert row["compile"] == "mismatch"
    assert "a tracing difference, not neuron's" in row["reasons"]["compile"]
    # A neuron output that Dynamo's CPU trace does not give is not excused.
    as_outputs = lambda t: sweep.float_outputs({"out": t})
    assert not sweep._dynamo_cpu_agrees(cpu_model, inputs, as_outputs(inputs["input_values"] * 3))
    assert sweep._dynamo_cpu_agrees(cpu_model, inputs, as_outputs(inputs["input_values"] * 2))
    # The same for gradients; the CPU model's own gradients are left as they were.
    cpu_model = _ScalesDifferently()
    inputs = {"input_values": torch.tensor([[1.0, -3.0]])}
    expected_grads = sweep._backward(cpu_model, sweep.float_outputs(cpu_model(**inputs)))
    row = sweep._record("fake", "_ScalesDifferently")
    sweep._compile_backward_run(_ScalesDifferently().to("neuron"), cpu_model, inputs, expected_grads, None, row)
    assert row["compile_backward"] == "mismatch"
    assert "a tracing difference, not neuron's" in row["reasons"]["compile_backward"]
    assert cpu_model.weight.grad is expected_grads["weight"]


class _FailsUnderDynamo(__import__("torch").nn.Module):
    """Raises when traced by Dynamo, on any device, and runs in eager mode (as some models do
    when transformers takes its compile-time branches)."""

    def forward(self, input_values):
        import torch
        if torch.compiler.is_compiling():
            return {"out": input_values.expand(3, 5)}  # a shape the input cannot expand to
        return {"out": input_values * 2}


def test_compile_error_from_tracing_is_told_apart():
    import torch
    cpu_model = _FailsUnderDynamo()
    inputs = {"input_values": torch.ones(2, 3, requires_grad=True)}
    expected = sweep.float_outputs(cpu_model(**inputs))
    for column, run in (("compile", lambda row: sweep._compile_run(
            _FailsUnderDynamo(), cpu_model, inputs, expected, row)),
            ("compile_backward", lambda row: sweep._compile_backward_run(
                _FailsUnderDynamo(), cpu_model, inputs, {"x": torch.ones(1)}, None, row))):
        row = sweep._record("fake", "_FailsUnderDynamo")
        run(row)
        assert row[column] == "error"
        assert "raises too: a tracing problem, not neuron's" in row["reasons"][column]
    # An error only neuron's compile gives is not excused.
    assert sweep._if_dynamo_cpu_raises(_Scale(), {"input_values": torch.ones(3)}) == ""


class _Scale(__import__("torch").nn.Module):
    def __init__(self):
        import torch
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0]))

    def forward(self, input_values):
        return {"out": (input_values * self.weight).tanh()}


def test_compiled_gradients_compared_with_cpu_and_with_eager():
    import torch
    cpu_model = _Scale()
    inputs = {"input_values": torch.tensor([[0.5, -1.0, 0.25]])}
    expected = sweep.float_outputs(cpu_model(**inputs))
    expected_grads = sweep._backward(cpu_model, expected)
    neuron_model = _Scale().to("neuron")
    row = sweep._record("fake", "_Scale")
    sweep._compile_backward_run(neuron_model, cpu_model, inputs, expected_grads, None, row)
    assert row["compile_backward"] == "pass", row
    assert row["compile_backward_max_err"] < 1e-6
    # Against a wrong reference it mismatches; when eager neuron gave the same gradients, the
    # reason says so (the compiler is then not the cause).
    # (Dynamo's CPU trace of a model with other weights gives other gradients too.)
    wrong = {n: g + 1 for n, g in expected_grads.items()}
    other = _Scale()
    other.weight.data *= 3
    row = sweep._record("fake", "_Scale")
    sweep._compile_backward_run(neuron_model, other, inputs, wrong, wrong, row)
    reason = row["reasons"]["compile_backward"]
    assert row["compile_backward"] == "mismatch" and "as in eager" not in reason and "tracing" not in reason
    row = sweep._record("fake", "_Scale")
    sweep._compile_backward_run(neuron_model, cpu_model, inputs, wrong, expected_grads, row)
    assert row["compile_backward"] == "mismatch"
    assert "as in eager neuron's backward" in row["reasons"]["compile_backward"]


def test_mismatches_are_weighed_against_a_float64_run():
    """A mismatch's reason gains the largest errors of neuron and of CPU float32 against the CPU
    model run in float64, computed from the real runs; its status stays a mismatch. Matching
    columns are left alone."""
    import torch
    cpu_model = _Scale()
    inputs = {"input_values": torch.tensor([[0.5, -1.0, 0.25]])}
    expected = sweep.float_outputs(cpu_model(**inputs))
    expected_grads = sweep._backward(cpu_model, expected)
    row = sweep._record("fake", "_Scale")
    neuron_out, neuron_grads = sweep._neuron_run(_Scale().to("neuron"), inputs, expected, expected_grads, row)
    assert row["forward"] == "pass" and row["backward"] == "pass", row
    # A CPU reference that is off by 1e-3 makes the backward a mismatch in which neuron is the
    # closer of the two to float64.
    off = {n: g + 1e-3 for n, g in expected_grads.items()}
    row["backward"], row["reasons"]["backward"] = "mismatch", "weight: 3/3 elements differ"
    sweep._weigh_mismatches_against_float64(
        row, cpu_model, inputs, {"forward": (neuron_out, expected), "backward": (neuron_grads, off)})
    reason = row["reasons"]["backward"]
    neuron_error, cpu_error = (float(part.split()[-1]) for part in reason.split(": ", 2)[-1].split(","))
    assert reason.startswith("weight: 3/3 elements differ; against float64: neuron's largest error")
    assert neuron_error < 1e-6 and cpu_error == pytest.approx(1e-3, rel=0.01)
    assert row["backward"] == "mismatch" and "forward" not in row["reasons"]


def test_graphs_the_compiler_gives_back_are_counted(monkeypatch):
    """A compiled column passes when a rejected graph runs eagerly; the row counts such graphs
    and keeps the compiler's warning."""
    import torch
    from torchneuron.compiler import lowering

    def reject(gm, **options):
        raise RuntimeError("lowering rejected this graph")

    monkeypatch.setattr(lowering, "lower", reject)
    cpu_model = _Scale()
    inputs = {"input_values": torch.tensor([[0.5, -1.0, 0.25]])}
    expected = sweep.float_outputs(cpu_model(**inputs))
    row = sweep._record("fake", "_Scale")
    sweep._compile_run(_Scale().to("neuron"), cpu_model, inputs, expected, row)
    assert row["compile"] == "pass"
    assert row["graphs_eager"] == 1 and row["graphs_compiled"] == 0
    assert "lowering rejected this graph" in row["reasons"]["graphs_eager"]
    assert sweep.totals([row])["models_with_eager_graphs"] == 1
