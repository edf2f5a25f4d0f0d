"""Inputs for a diffusers model, made from its forward signature and config: the latents
(`sample`, `hidden_states`, `x`, ...) in the layouts a diffusers model takes (images, video
frames in either order, 1-D signals, packed token sequences with their position ids), the
timestep, text conditioning (`encoder_hidden_states`, pooled projections, ids), control images
and guidance. run_candidates tries each layout on the CPU model; a failure that names the size it
wanted (a matmul's inner size, a convolution's channels) is repaired and tried again."""

import inspect
import re

from .diffusers_models import BATCH, TEXT
from .models import _seed
from .reference import first_line

SIDE = 32
_MAIN = ("sample", "hidden_states", "x", "latents", "z", "xs", "input", "latent", "z_latent")
_TIME = re.compile(r"^(timestep|timesteps|t|sigma|timestep_r|r_timestep|timestep_ratio|decoder_noise_time|"
                   r"timestep_img|timestep_text)$")
_TEXT = re.compile(r"^(encoder_hidden_states(_t5|_1|_2|_llama3)?|context|prompt_embeds|text_hidden_states|cap_feats|clip_text|"
                   r"encoder_hidden_states_t5|text_bth|lyric_hidden_states|control_context)$")
_POOLED = re.compile(r"^(pooled_projections|pooled_text_emb|clip_text_pooled|pooled_embeds|image_embeds|"
                     r"proj_embedding|global_hidden_states)$")
_SKIP = ("return_dict", "attention_mask", "encoder_attention_mask", "cross_attention_kwargs",
         "attention_kwargs", "joint_attention_kwargs", "generator", "sample_posterior")
_MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
_CONV = re.compile(r"expected input\[[^\]]*\] to have (\d+) channels, but got (\d+) channels")


def _config(model, *names, default=None):
    """The first int config value among names."""
    for name in names:
        value = model.config.get(name) if hasattr(model.config, "get") else getattr(model.config, name, None)
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], int):
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def _hint(model):
    """The main input's layout order for a class: video, 1-D or image first."""
    name = type(model).__name__
    if re.search(r"3D|Video|Temporal|I2V|Motion|Mochi|Wan|LTX|Cosmos|Allegro|Latte|Hunyuan.*Video|Cog|Magvit|Helios|"
                 r"SkyReels|EasyAnimate|ConsisID|Kandinsky5|SanaVideo|ChronoEdit|Vid|Framepack|Anim", name):
        return ("video", "video_fc", "image", "signal", "tokens")
    if re.search(r"1D|Audio|Oobleck|Music|Vocoder|StableAudio|Ace|Film|Proteina", name):
        return ("signal", "tokens", "image", "video")
    return ("image", "tokens", "video", "video_fc", "signal")


class _Maker:
    """Makes one layout's inputs for a model."""

    def __init__(self, model, layout):
        import torch
        self.torch, self.model, self.layout = torch, model, layout
        self.gen = torch.Generator().manual_seed(0)
        self.params = inspect.signature(model.forward).parameters
        self.channels = _config(model, "in_channels", "in_dim", "io_channels", "latent_channels",
                                "in_visual_dim", "input_channels", "num_channels", "audio_in_channels",
                                default=4)
        side = _config(model, "sample_size", "sample_height", default=SIDE)
        self.side = side if side <= 64 else SIDE
        autoencoder = "Autoencoder" in type(model).__name__ or "VAE" in type(model).__name__
        self.frames = _config(model, "sample_frames", "num_frames", default=5 if autoencoder else 2)
        self.frames = self.frames if self.frames <= 8 else 5
        self.tokens = 16
        # text as long as a model's fixed text positions (CogVideoX's 226), else TEXT
        self.text_len = _config(model, "max_text_seq_length", default=TEXT)
        self.text_len = self.text_len if self.text_len <= 256 else TEXT
        self.text_dim = _config(model, "cross_attention_dim", "joint_attention_dim", "caption_channels",
                                "text_embed_dim", "text_dim", "cap_feat_dim", "context_in_dim",
                                "encoder_hid_dim", "text_hidden_dim", "cond_token_dim", default=32)

    def randn(self, *shape):
        return self.torch.randn(*shape, generator=self.gen)

    def main(self):
        """The latents in this layout."""
        b, c, s, f = BATCH, self.channels, self.side, self.frames
        return {"image": lambda: self.randn(b, c, s, s), "video": lambda: self.randn(b, c, f, s, s),
                "video_fc": lambda: self.randn(b, f, c, s, s), "signal": lambda: self.randn(b, c, 64),
                "tokens": lambda: self.randn(b, self.tokens, c)}[self.layout]()

    def value(self, name, main):
        """The input for one forward parameter, or None to leave it at its default."""
        torch = self.torch
        if _TIME.match(name):
            return torch.tensor([0.3, 0.7])
        if _TEXT.match(name):
            return self.randn(BATCH, self.text_len, self.text_dim)
        if _POOLED.match(name):
            return self.randn(BATCH, _config(self.model, "pooled_projection_dim", "projection_dim",
                                             "clip_text_pooled_in_channels", "global_states_input_dim",
                                             default=32))
        axes = len(self.model.config.get("axes_dims_rope") or (0, 0, 0))  # one id per rotary axis
        if name in ("img_ids", "image_ids"):
            return torch.zeros(self.tokens, axes)
        if name == "txt_ids":
            return torch.zeros(TEXT, axes)
        if self.layout == "tokens" and name == "img_shapes":  # (frames, height, width) in patches
            return [(1, 4, 4)] * BATCH
        if self.layout == "tokens" and name in ("height", "width"):  # 16 packed tokens: 1 x 4 x 4
            return 4
        if self.layout == "tokens" and name == "num_frames":
            return 1
        if name == "guidance":
            return torch.tensor([3.5, 3.5]) if self.model.config.get("guidance_embeds") else None
        if name == "controlnet_cond":
            scale = 2 ** (len(self.model.config.get("conditioning_embedding_out_channels") or (1,)) - 1)
            if main.dim() == 4 and self.model.config.get("conditioning_embedding_out_channels"):
                cond = _config(self.model, "conditioning_channels", default=3)
                return self.randn(BATCH, cond, main.shape[2] * scale, main.shape[3] * scale)
            return self.randn(*main.shape)
        if name == "control_hidden_states" and main.dim() == 5:  # WanVACE's control video
            shape = list(main.shape)
            shape[1] = _config(self.model, "vace_in_channels", default=shape[1])
            return self.randn(*shape)
        if name == "conditioning_scale":
            return 1.0
        if name in ("class_labels", "labels") and (self.params[name].default is inspect.Parameter.empty
                                                   or self.model.config.get("num_class_embeds")
                                                   or self.model.config.get("norm_type") == "ada_norm_zero"):
            return torch.tensor([1, 3])
        if name in ("original_size", "target_size", "crop_coords", "crop_coords_top_left"):
            return torch.tensor([[self.side * 8, self.side * 8]] * BATCH, dtype=torch.float32)
        if name == "fps":
            return torch.tensor([8, 8])
        if name in ("image_latents", "control_latents", "context_latents", "condition_latents", "inpaint_latents"):
            return self.randn(*main.shape) if self.params[name].default is inspect.Parameter.empty else None
        if name == "micro_conds":  # (width, height, crop left, crop top, aesthetic score) as the pipeline
            return torch.tensor([[self.side * 8.0, self.side * 8.0, 0.0, 0.0, 6.0]] * BATCH)
        if name == "added_time_ids":
            return torch.tensor([[6.0, 127.0, 0.02]] * BATCH)
        return None

    def required(self, name, main):
        """A required parameter the optional rules leave out, guessed from its name (the CPU
        forward is the judge): masks all ones, ids and tokens zeros, lengths, hidden states like
        the text, latents like the main input."""
        torch = self.torch
        if name.endswith("attention_mask") or name.endswith("_mask"):
            return torch.ones(BATCH, TEXT, dtype=torch.bool)
        if name.endswith("_ids") or name.endswith("tokens"):
            return torch.zeros(BATCH, TEXT, dtype=torch.long)
        if name.endswith("_lens") or name.endswith("_len"):
            return torch.tensor([TEXT] * BATCH)
        if name == "img_shapes":  # (frames, height, width) in patches of the packed tokens
            return [(1, 4, 4)] * BATCH
        if name.endswith("hidden_states"):
            return self.randn(BATCH, TEXT, self.text_dim)
        if "latents" in name:
            return self.randn(*main.shape)
        return None

    def inputs(self):
        """The inputs dict for this layout: the main input and every parameter we can make."""
        main_name = next((n for n in _MAIN if n in self.params), None)
        if main_name is None:
            main_name = next(iter(n for n in self.params if n != "self"), None)
        main = self.main()
        made = {main_name: main}
        for name, param in self.params.items():
            if name in made or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            required = param.default is inspect.Parameter.empty
            if name in _SKIP and not required:
                continue
            value = self.value(name, main) if name not in _SKIP else None
            if value is None and required:
                value = self.required(name, main)
            if value is not None:
                made[name] = value
            elif param.default is inspect.Parameter.empty:
                return None, f"{type(self.model).__name__}.forward needs {name!r}, which the harness cannot make"
        return made, None


def _repair(message, inputs, main_name):
    """An inputs dict resized to what the error says the model wanted, or None."""
    found = _MATMUL.search(message)
    if found:
        rows, have, want = int(found.group(1)), int(found.group(2)), int(found.group(3))
        # conditioning first, latents last; an input with the matmul's row count before others
        names = sorted(inputs, key=lambda n: (n == main_name, not (
            hasattr(inputs[n], "shape") and inputs[n].dim() and inputs[n].numel() == rows * have)))
        for name in names:
            value = inputs[name]
            if hasattr(value, "shape") and value.dim() >= 2 and value.shape[-1] == have and value.is_floating_point():
                fixed = dict(inputs)
                import torch
                fixed[name] = torch.randn(*value.shape[:-1], want, generator=torch.Generator().manual_seed(1))
                return fixed
        return None
    found = _CONV.search(message)
    if found:
        want, got = int(found.group(1)), int(found.group(2))
        value = inputs[main_name]
        dim = next((d for d in (1, 2) if value.dim() > d and value.shape[d] == got), None)
        if dim is not None:
            import torch
            fixed = dict(inputs)
            shape = list(value.shape)
            shape[dim] = want
            fixed[main_name] = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
            return fixed
    return None


def run_candidates(model, repairs=6):
    """Runs the CPU model on each layout's inputs (each repaired up to `repairs` times); returns
    ((inputs, outputs), None) for the first that runs, else (None, the first failure)."""
    errors = []
    for layout in _hint(model):
        inputs, why = _Maker(model, layout).inputs()
        if inputs is None:
            return None, why
        main_name = next(iter(inputs))
        for _ in range(repairs + 1):
            try:
                _seed()
                return (inputs, model(**inputs)), None  # with autograd, for the backward columns
            except Exception as exc:  # noqa: BLE001
                errors.append(f"[{layout}] " + first_line(exc))
                inputs = _repair(str(exc), inputs, main_name)
                if inputs is None:
                    break
    return None, errors[0] if errors else "(no inputs)"
