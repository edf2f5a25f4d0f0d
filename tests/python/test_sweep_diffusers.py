"""Tests for the sweep's diffusers corpus (torchneuron/sweep/diffusers_*.py, `--corpus diffusers`)."""

import json
import sys

import diffusers  # noqa: F401  (the test set-up installs it: a broken install fails, never skips)
import torch

from conftest import run_in_new_group
from torchneuron.sweep import diffusers_inputs, diffusers_models, diffusers_run, run

from test_sweep import _env  # the tool's subprocess environment


def test_unet_and_vae_pass_every_column(tmp_path):
    out, md = tmp_path / "sweep.json", tmp_path / "sweep.md"
    cmd = [sys.executable, "-m", "torchneuron.sweep", "--corpus", "diffusers", "--models",
           "UNet2DConditionModel,AutoencoderKL", "--jobs", "1", "--output", str(out), "--markdown", str(md)]
    proc = run_in_new_group(cmd, 900, cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    rows = {r["model"]: r for r in report["models"]}
    assert set(rows) == {"UNet2DConditionModel", "AutoencoderKL"} and report["diffusers"]
    for row in rows.values():
        assert row["reference"] == "pass" and row["strategy"] == "tiny", row
        for column in run.COLUMNS:
            assert row[column] == "pass", (column, row["reasons"])
        assert row["graphs_compiled"] >= 2 and row["graphs_eager"] == 0, row
        assert row["pretrained_max_err"] is not None
    unet = rows["UNet2DConditionModel"]
    assert unet["forward_max_err"] < run.ATOL and not unet.get("float64_accepted"), unet
    assert "# torchneuron diffusers sweep" in md.read_text()


def test_shrink_keeps_the_models_invariants():
    classes = diffusers_models.model_classes()
    assert len(classes) > 100 and "FluxTransformer2DModel" in classes
    unet = diffusers_models.shrink(diffusers_models.init_defaults(classes["UNet2DConditionModel"]), "tiny")
    assert len(unet["down_block_types"]) == len(unet["up_block_types"]) == len(unet["block_out_channels"]) == 2
    groups = unet.get("norm_num_groups", 32)
    assert all(c % groups == 0 for c in unet["block_out_channels"]) and unet["layers_per_block"] == 1
    # SD3: the caption projection is the inner dim (heads x head dim): scaled with the heads.
    sd3 = diffusers_models.shrink(diffusers_models.init_defaults(classes["SD3Transformer2DModel"]), "tiny")
    assert sd3["num_attention_heads"] == 2 and "attention_head_dim" not in sd3
    assert sd3["caption_projection_dim"] == 2 * 64 and sd3["num_layers"] == 1
    # Flux: the head dim stays, so the rotary axes still add up to it.
    flux = diffusers_models.shrink(diffusers_models.init_defaults(classes["FluxTransformer2DModel"]), "tiny")
    assert flux["num_attention_heads"] == 2 and flux["num_single_layers"] == 1 and "axes_dims_rope" not in flux
    model, _ = diffusers_models._build(classes["FluxTransformer2DModel"], diffusers_models.init_defaults(
        classes["FluxTransformer2DModel"]), "tiny")
    assert sum(p.numel() for p in model.parameters()) < 5_000_000


def test_input_sizes_are_repaired_from_the_error():
    inputs = {"hidden_states": torch.zeros(2, 4, 8, 8), "encoder_hidden_states": torch.zeros(2, 8, 32)}
    fixed = diffusers_inputs._repair("mat1 and mat2 shapes cannot be multiplied (16x32 and 144x64)",
                                     inputs, "hidden_states")
    assert fixed["encoder_hidden_states"].shape == (2, 8, 144) and fixed["hidden_states"].shape == (2, 4, 8, 8)
    fixed = diffusers_inputs._repair("Given groups=1, weight of size [8, 16, 3, 3], expected input[2, 4, 8, 8] "
                                     "to have 16 channels, but got 4 channels instead", inputs, "hidden_states")
    assert fixed["hidden_states"].shape == (2, 16, 8, 8)
    assert diffusers_inputs._repair("something else", inputs, "hidden_states") is None


def test_a_class_that_cannot_be_built_is_the_harness_column():
    row = diffusers_run.run_class("AudioLDM2ProjectionModel")
    assert row["reference"] == "error" and row["status"] == "reference_error" and not row["built"]
    assert "text_encoder_dim" in row["reasons"]["reference"], row["reasons"]
    assert all(row[c] == "skipped" for c in run.COLUMNS)
    row = diffusers_run.run_class("NoSuchModel")
    assert row["reference"] == "skipped" and row["status"] == "skipped"


def test_gradients_within_cpu_rounding_pass_and_farther_ones_do_not():
    wide = {"g": torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64)}
    cpu = {"g": torch.tensor([1.0, 2.0, 1e-3])}  # the CPU's float32 sum is 1e-3 off float64
    near = {"g": torch.tensor([1.0, 2.0, -1.5e-3])}  # 2.5e-3 from the CPU, 1.5e-3 from float64
    far = {"g": torch.tensor([1.0, 2.0, 5e-3])}
    accept = run.within_cpu_rounding(wide)
    assert run.compare_tensors(near, cpu)[0] is not None  # outside atol = rtol = 1e-4
    assert run.compare_tensors(near, cpu, accept=accept)[0] is None
    assert run.compare_tensors(far, cpu, accept=accept)[0] is not None


def test_a_model_that_cannot_move_to_neuron_is_a_load_error_row():
    class Stuck(torch.nn.Linear):
        def to(self, *args, **kwargs):
            raise RuntimeError("cannot move")

    model = Stuck(4, 2)
    inputs = {"input": torch.ones(3, 4)}
    row = run._record("stuck", "Stuck")
    row["reference"] = "pass"
    row = run.run_device_columns(row, model, inputs, model(**inputs), 0.0)
    assert row["load"] == "error" and "cannot move" in row["reasons"]["load"], row
    assert row["status"] == "error" and row["pretrained"] == "skipped"


def test_a_model_holding_a_tensor_computed_in_forward_still_copies_to_neuron():
    # Old-style weight_norm recomputes `weight` in a pre-hook: after an autograd forward it is a
    # non-leaf, which deepcopy refuses (AutoencoderVidTok, MiniMaxMusic3Vocoder).
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = torch.nn.utils.weight_norm(torch.nn.Linear(4, 3)).eval()
    inputs = {"input": torch.randn(2, 4, generator=torch.Generator().manual_seed(0))}
    outputs = model(**inputs)
    row = run._record("weight_norm", "Linear")
    row["reference"] = "pass"
    row = run.run_device_columns(row, model, inputs, outputs, 0.0, skip=("compile", "compile_backward", "pretrained"))
    assert row["load"] == "pass" and row["forward"] == "pass" and row["backward"] == "pass", row


def test_shrink_cuts_layer_indices_and_keeps_padding_ids_inside_the_vocabulary():
    out = diffusers_models.shrink({"num_layers": 40, "vace_layers": [0, 5, 10], "vocab_size": 32064,
                                   "pad_token_id": 32000, "transformer_layers_per_block": (1, 2, 10)}, "tiny")
    assert out["num_layers"] == 1 and out["vace_layers"] == [0], out
    assert out["vocab_size"] == 128 and out["pad_token_id"] == 0, out
    assert out["transformer_layers_per_block"] == (1, 1, 1), out  # counts, not indices


def test_a_none_patch_size_is_filled_only_when_the_model_needs_it():
    classes = diffusers_models.model_classes()
    wan = classes["AutoencoderKLWan"]  # patch_size None: no patchify
    _, overrides = diffusers_models._build(wan, diffusers_models.init_defaults(wan), "tiny")
    assert "patch_size" not in overrides
    latte = classes["HunyuanDiT2DModel"]  # cannot be built without one
    _, overrides = diffusers_models._build(latte, diffusers_models.init_defaults(latte), "tiny")
    assert overrides["patch_size"] == 2


def test_a_multi_controlnet_wrapper_runs_two_tiny_children():
    prep = diffusers_models.prepare("SD3MultiControlNetModel")
    assert prep.model is not None, prep.attempts
    assert len(prep.model.nets) == 2 and len(prep.inputs["controlnet_cond"]) == 2
    assert prep.inputs["conditioning_scale"] == [1.0, 1.0]


def test_text_length_follows_the_models_fixed_text_positions():
    classes = diffusers_models.model_classes()
    model, _ = diffusers_models._build(classes["CogVideoXTransformer3DModel"], diffusers_models.init_defaults(
        classes["CogVideoXTransformer3DModel"]), "tiny")
    maker = diffusers_inputs._Maker(model, "video_fc")
    assert maker.value("encoder_hidden_states", maker.main()).shape[1] == model.config.max_text_seq_length


def test_none_sizes_are_filled_only_for_a_model_that_cannot_be_built_without_them():
    defaults = {"in_channels": None, "out_channels": None, "caption_channels": None, "sample_size": None,
                "norm_type": None}
    filled = diffusers_models._none_sizes(defaults, {"in_channels": 4})
    assert filled == {"out_channels": 4, "caption_channels": 32, "sample_size": 32}, filled
    classes = diffusers_models.model_classes()
    latte = classes["LatteTransformer3DModel"]  # its caption projection needs caption_channels
    _, overrides = diffusers_models._build(latte, diffusers_models.init_defaults(latte), "tiny")
    assert overrides["caption_channels"] == 32


def test_micro_conditions_and_per_modality_timesteps_are_made():
    class Tiny(torch.nn.Module):
        config = {"in_channels": 4}

        def forward(self, sample, timestep_img, timestep_text, micro_conds):
            return sample

    inputs, why = diffusers_inputs._Maker(Tiny(), "image").inputs()
    assert why is None and inputs["micro_conds"].shape == (2, 5), why
    assert inputs["timestep_img"].shape == inputs["timestep_text"].shape == (2,)


def test_a_tiny_model_over_the_budget_is_narrowed():
    out = diffusers_models.shrink({"upsample_initial_channel": 1536, "decoder_dim": 1024, "in_channels": 256,
                                   "latent_dim": 2048, "num_layers": 4}, "narrow")
    assert out == {"upsample_initial_channel": 192, "decoder_dim": 128, "num_layers": 1}, out
    prep = diffusers_models.prepare("LongCatAudioDiTTransformer")  # 112M parameters tiny
    assert prep.strategy == "narrow" and any(why.startswith("MemoryError") for _, _, why in prep.attempts)


def test_a_wrapper_that_takes_only_one_child_gets_one():
    prep = diffusers_models.prepare("QwenImageMultiControlNetModel")  # "only supports a single" one
    assert prep.model is not None and len(prep.model.nets) == 1, prep.attempts
    assert len(prep.inputs["controlnet_cond"]) == 1
