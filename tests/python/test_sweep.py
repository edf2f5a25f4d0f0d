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
    assert "[2/2]" in proc.stderr and "ETA 0:00" in proc.stderr  # the progress line
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
        # Saved and loaded back with from_pretrained(device_map="neuron", bfloat16).
        assert row["pretrained"] == "pass" and row["pretrained_max_err"] is not None, row
        # Where the model's time went, stage by stage, within its total.
        assert list(row["stage_s"]) == ["reference", "eager", "compile", "compile_backward", "float64",
                                        "pretrained"]
        assert row["stage_s"]["compile"] > 0 and sum(row["stage_s"].values()) <= row["time_s"] + 0.1
    assert report["totals"]["models"] == 2 and report["totals"]["built"] == 2
    text = md.read_text()
    assert "| bert |" in text and "| gpt2 |" in text and "Most used fallback ops" in text
    assert report["totals"]["pretrained_pass"] == 2 and "from_pretrained bf16" in text


def test_progress_line_gives_elapsed_time_and_eta(capsys):
    from torchneuron.sweep import cli
    clock = iter([100.0, 130.0, 160.0, 4000.0])  # start, then one reading per model
    show = cli._progress(now=lambda: next(clock))
    show({"model": "bert", "status": "pass"}, 1, 10)
    show({"model": "gpt2", "status": "error"}, 2, 10)
    show({"model": "llama", "status": "pass"}, 3, 3)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[ 1/10] bert ") and "pass=1 mismatch=0 error=0" in lines[0]
    assert lines[0].endswith("| elapsed 0:30 ETA 4:30")  # 30 s per model, 9 left
    assert lines[1].endswith("pass=1 mismatch=0 error=1 skipped=0 | elapsed 1:00 ETA 4:00")
    assert lines[2].endswith("| elapsed 1:05:00 ETA 0:00")


def test_resume_keeps_finished_rows_and_runs_only_the_rest(tmp_path, monkeypatch):
    from torchneuron.sweep import cli, run
    out = tmp_path / "sweep.json"
    bert = dict(run._record("bert", "BertModel"), status="error", time_s=3.0)
    # A stopped run: one whole row, then a line cut short.
    (tmp_path / "sweep.json.rows.jsonl").write_text(json.dumps(bert) + "\n" + '{"model": "gp')
    asked = []

    def fake_run_tasks(tasks, jobs, timeout, runner, on_result):
        asked.extend(tasks)
        rows = [dict(run._record(t, None), status="skipped", time_s=1.0) for t in tasks]
        for i, row in enumerate(rows, 1):
            on_result(row, i, len(rows))
        return rows

    monkeypatch.setattr(cli, "run_tasks", fake_run_tasks)
    argv = ["--models", "bert,gpt2,t5", "--output", str(out), "--markdown", str(tmp_path / "s.md")]
    assert cli.main(argv + ["--resume"]) == 0
    assert asked == ["gpt2", "t5"]  # bert was done; the cut line is not a row
    report = json.loads(out.read_text())
    assert [r["model"] for r in report["models"]] == ["bert", "gpt2", "t5"]
    assert report["models"][0]["status"] == "error"  # bert's row as the stopped run left it
    lines = (tmp_path / "sweep.json.rows.jsonl").read_text().splitlines()
    assert [json.loads(x)["model"] for x in lines[-2:]] == ["gpt2", "t5"]
    # Without --resume a run starts over: the old rows are dropped.
    asked.clear()
    assert cli.main(argv) == 0 and asked == ["bert", "gpt2", "t5"]
    assert len((tmp_path / "sweep.json.rows.jsonl").read_text().splitlines()) == 3


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
    assert row["status"] == "skipped" and row["load"] == "skipped" and row["reference"] == "skipped"
    assert "unknown model type" in row["reasons"]["load"]
    for column in ("forward", "backward", "compile"):
        assert row[column] == "skipped" and row["reasons"][column]


def test_model_that_fails_to_build_is_recorded():
    # Every shrink strategy fails to make a config: the CPU reference column says so, apart from
    # the device columns (which say there was no reference), and the totals count it there.
    with mock.patch.object(sweep.models, "tiny_config", side_effect=ValueError("bad config")):
        row = sweep.run_model("bert")
    assert row["status"] == "reference_error" and row["reference"] == "error" and not row["built"]
    assert "could not be built" in row["reasons"]["reference"]
    assert "ValueError: bad config" in row["reasons"]["reference"]
    assert [a.split(" ")[0] for a in row["shrink_attempts"]] == list(sweep.STRATEGIES)
    assert row["load"] == "skipped" and row["reasons"]["forward"].startswith("no CPU reference")
    assert row["time_s"] is not None
    t = sweep.totals([row])
    assert t["reference_error"] == 1 and t["error"] == 0 and t["built"] == 0
    text = sweep.markdown([row])
    assert "CPU-reference failures by class" in text and "build: ValueError" in text


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


# --- The harness (issue 46): shrink ladder, inputs from what a model declares, sub-models. ---

def test_shrinker_keeps_derived_sizes_consistent():
    import transformers as tf
    # MLA (DeepSeek-V3) needs as many key/value heads as heads: the ratio is kept, not the count.
    config = sweep.tiny_config(tf.DeepseekV3Config)
    assert config.num_attention_heads == config.num_key_value_heads == 4
    assert config.kv_lora_rank == config.q_lora_rank == 16
    assert sweep.tiny_config(tf.WhisperConfig).max_source_positions == 16
    assert config.n_group == config.topk_group == 1 and config.n_routed_experts == 4
    # GPT-J rotates only rotary_dim of each head: it must fit the tiny head.
    config = sweep.tiny_config(tf.GPTJConfig)
    assert config.rotary_dim <= config.n_embd // config.n_head
    # M-RoPE: the sections fill half of the tiny head (the model reads [16, 24, 24] otherwise).
    text = sweep.tiny_config(tf.Qwen2_5_VLConfig).text_config
    head = text.hidden_size // text.num_attention_heads
    assert sum(text.rope_parameters["mrope_section"]) * 2 == head
    assert sweep.check_config(sweep.tiny_config(tf.Qwen2_5_VLConfig)) == []
    # Per-stage head lists (Swin) divide every stage's width.
    config = sweep.tiny_config(tf.SwinConfig)
    assert all(config.embed_dim * 2 ** i % h == 0 for i, h in enumerate(config.num_heads))


def test_shrinker_cuts_per_layer_lists_and_configs_together():
    import transformers as tf
    # Gemma 4's text config is heterogeneous (some layers have their own head_dim): the tiny
    # config keeps one such layer, as layer 1, with the layer-type list cut to the same layers.
    default = tf.Gemma4TextConfig()
    config = sweep.tiny_config(tf.Gemma4TextConfig)
    assert config.num_hidden_layers == 2 and len(config.layer_types) == 2
    assert config.layer_types[0] != config.layer_types[1]
    assert set(default.layer_types) == set(config.layer_types)
    assert [int(k) for k in config.to_dict()["per_layer_config"]] == [1]
    model, config = sweep.build_model("gemma4_text")
    assert sum(p.numel() for p in model.parameters()) < 2_000_000


def test_check_config_names_broken_invariants():
    class Config:  # what a careless shrink would make (transformers' own checks refuse it)
        sub_configs = {}

        def __init__(self):
            self.hidden_size, self.num_attention_heads, self.num_key_value_heads = 30, 4, 3
            self.num_hidden_layers, self.layer_types = 2, ["full_attention"] * 3
            self.rope_parameters = {"rope_type": "default", "mrope_section": [16, 24, 24]}

    problems = sweep.check_config(Config())
    assert any("mrope_section" in p for p in problems)
    assert any("not a multiple" in p for p in problems)
    assert any("key/value heads" in p for p in problems)
    assert any("layer_types has 3 entries for 2 layers" in p for p in problems)


def test_ladder_falls_back_to_a_less_tiny_strategy_and_records_it():
    # Bros's tiny config builds but its CPU forward raises; keeping the widths ("layers") runs.
    prep = sweep.prepare("bros")
    assert prep.strategy == "layers" and prep.built_strategy == "tiny"
    assert [(s, stage) for s, stage, _ in prep.attempts] == [("tiny", "reference")]
    assert "bbox" in prep.inputs  # a layout model gets boxes beside its token ids
    box = prep.inputs["bbox"]
    assert box.shape == (sweep.BATCH, sweep.SEQ, 4) and (box[..., 2:] > box[..., :2]).all()


def test_inputs_come_from_the_forward_signature_and_config():
    import torch

    class Declares(torch.nn.Module):
        main_input_name = "past_values"

        def forward(self, past_values, past_observed_mask, freq, attention_mask=None):
            return past_values

    from types import SimpleNamespace
    config = SimpleNamespace(context_length=24, lags_sequence=[1, 4], num_input_channels=1)
    cands, why = sweep.input_candidates(Declares(), config)
    assert why == "" and set(cands[0]) == {"past_values", "past_observed_mask", "freq"}
    assert cands[0]["past_values"].shape == (sweep.BATCH, 28)  # context plus the largest lag
    assert cands[0]["past_observed_mask"].shape == cands[0]["past_values"].shape
    assert sweep.required_params(Declares().forward) == ["past_values", "past_observed_mask", "freq"]

    # Real models: a Qwen-VL style vision tower gets flattened patches and their (t, h, w) grid;
    # a video model a (batch, frames, channels, height, width) clip.
    prep = sweep.prepare("qwen2_5_vl_vision")
    grid = prep.inputs["grid_thw"]
    assert prep.strategy == "tiny" and grid.shape == (1, 3)
    assert prep.inputs["hidden_states"].shape[0] == int(grid.prod())
    prep = sweep.prepare("videomae")
    assert prep.inputs["pixel_values"].dim() == 5
    assert prep.inputs["pixel_values"].shape[1] == prep.config.num_frames


def test_sub_model_inputs_are_captured_from_its_parent():
    # Blip-2's Q-Former takes query embeddings that only its parent makes: the sweep builds
    # blip-2, hooks the Q-Former and runs the Q-Former alone on what it was called with.
    import torch
    assert "blip-2" in sweep.submodel.parents("blip_2_qformer", sweep.architectures())
    prep = sweep.prepare("blip_2_qformer")
    assert prep.strategy == "tiny, inputs from blip-2"
    assert type(prep.model).__name__ == "Blip2QFormerModel"
    assert isinstance(prep.inputs["query_embeds"], torch.Tensor)
    assert not prep.inputs["query_embeds"].requires_grad
    again = prep.model(**prep.inputs)  # the captured call runs again and gives the same output
    assert torch.equal(again.last_hidden_state, prep.outputs.last_hidden_state)


def test_missing_package_is_its_own_class():
    row = sweep.run_model("timm_wrapper")
    assert row["reference"] == "unavailable" and row["status"] == "unavailable"
    assert row["reasons"]["reference"].startswith("needs timm")
    t = sweep.totals([row])
    assert t["unavailable"] == 1 and t["reference_error"] == 0 and t["error"] == 0
    assert "unavailable: needs timm" in sweep.markdown([row])


def test_shrinker_keeps_a_backbone_output_per_stage_and_hybrid_attention():
    import transformers as tf
    # Depth Anything's DPT neck reads four backbone stages: the tiny backbone keeps four layers,
    # each an output, instead of out_indices 9..12 of a two-layer backbone (no hidden states).
    backbone = sweep.tiny_config(tf.DepthAnythingConfig).backbone_config
    assert backbone.num_hidden_layers == 4 and backbone.out_indices == [1, 2, 3, 4]
    # Zamba 2's two layers keep one of each kind, with the hybrid (attention) layer's id.
    config = sweep.tiny_config(tf.Zamba2Config)
    assert config.layers_block_type == ["linear_attention", "hybrid"] and config.hybrid_layer_ids == [1]
    # Bamba defaults to no attention layer at all (a checkpoint sets them): the tiny one has one,
    # and its Mamba heads times head size match the expanded width.
    config = sweep.tiny_config(tf.BambaConfig)
    assert config.attn_layer_indices == [1]
    assert config.mamba_n_heads * config.mamba_d_head == config.mamba_expand * config.hidden_size
