"""The sweep's inputs, built from what a model declares: its main input name(s), the required
parameters of its `forward`, and its config (vocabulary, image size and channels, frames, mel
bins, sampling, context length, ...). input_candidates returns the input dicts to try in order;
the first the CPU model accepts is used (reference.prepare). Inputs for sub-models that only run
inside a parent are captured from the parent instead (submodel.capture_inputs)."""

import inspect

from .shrink import IMAGE_SIZE, SPECIAL_ROOM, _is_int


BATCH, SEQ = 2, 8
AUDIO_SAMPLES = 1600
_SUBS = ("text_config", "vision_config", "audio_config", "encoder_config", "decoder",
         "encoder", "thinker_config", "speech_config")


def _find(config, *names, default=None):
    """The first int-valued attribute among names on the config or its sub-configs."""
    for c in [config] + [getattr(config, s, None) for s in _SUBS]:
        for name in names:
            value = getattr(c, name, None) if c is not None else None
            if _is_int(value) and value > 0:
                return value
            if isinstance(value, (list, tuple)) and value and all(map(_is_int, value)):
                return value[0]
    return default


def _vision(config):
    """Returns (channels, image size) from a config or its vision sub-config."""
    size = _find(config, "image_size", "img_size", "input_size", default=IMAGE_SIZE)
    channels = _find(config, "num_channels", "in_channels", "in_chans", default=3)
    return channels, size


def _vocab(config):
    """Returns the text vocabulary size of a config (or of its text sub-config)."""
    return _find(config, "vocab_size", default=128)


def required_params(forward):
    """The names of forward's parameters that have no default (not *args / **kwargs)."""
    params = inspect.signature(forward).parameters.values()
    return [p.name for p in params if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"]


class _Maker:
    """Makes the tensor for one input name from the config; None for a name it does not know."""

    def __init__(self, config, params=()):
        import torch
        self.torch, self.config = torch, config
        self.gen = torch.Generator().manual_seed(0)
        self.channels, self.size = _vision(config)
        self.vocab = _vocab(config)
        self.frames = _find(config, "num_frames", "frames_per_clip", default=None)
        self.mels = _find(config, "num_mel_bins", "feature_size", "input_feat_per_channel",
                          "n_mels", "mel_bins", "input_feat_size", default=80)
        src = getattr(config, "max_source_positions", None)
        self.mel_frames = min(2 * src, 1024) if _is_int(src) else 64  # (Whisper wants 2 x positions)
        self.patch = _find(config, "patch_size", default=4)
        self.merge = _find(config, "spatial_merge_size", "merge_size", default=2)
        self.temporal = _find(config, "temporal_patch_size", default=1)
        # Vision towers fed flattened patches: with a (t, h, w) grid per image (Qwen-VL style),
        # or with each image's (h, w) in patches and a patch mask (NaFlex, Siglip2 style).
        self.layout = ("grid" if {"grid_thw", "image_grid_thw", "video_grid_thw"} & set(params) else
                       "naflex" if "spatial_shapes" in params else "image")

    def patches(self):
        """Flattened patches: (patches, channels x temporal x patch x patch) for a grid of
        (1, 2 merges, 2 merges); (batch, 16, channels x patch x patch) for NaFlex."""
        flat = self.channels * self.patch * self.patch
        if self.layout == "naflex":
            return self.randn(BATCH, 16, flat)
        side = 2 * self.merge
        return self.randn(side * side, flat * self.temporal)

    def grid(self):
        """The (t, h, w) patch grid of the one image patches() makes."""
        return self.torch.tensor([[1, 2 * self.merge, 2 * self.merge]])

    def randn(self, *shape):
        """A seeded standard normal tensor."""
        return self.torch.randn(*shape, generator=self.gen)

    def ids(self, *shape):
        """Seeded token ids below the special-token room of the vocabulary."""
        high = max(4, self.vocab - SPECIAL_ROOM)
        return self.torch.randint(3, high, shape or (BATCH, SEQ), generator=self.gen)

    def video(self):
        """(batch, frames, channels, height, width) clips."""
        return self.randn(BATCH, self.frames or 4, self.channels, self.size, self.size)

    def time_series(self):
        """A past window as long as the config's context (plus lags) for time-series models."""
        c = self.config
        length = _find(c, "context_length", "context_len", "patch_length", default=32)
        lags = getattr(c, "lags_sequence", None)
        if _is_int(getattr(c, "context_length", None)) and isinstance(lags, (list, tuple)) and lags:
            length += max(lags)
        channels = _find(c, "num_input_channels", "input_size", default=1)
        return (BATCH, length, channels) if channels > 1 else (BATCH, length)

    def make(self, name):
        """The tensor for one input name, or None."""
        t, c = self.torch, self.config
        if name in ("input_ids", "decoder_input_ids", "labels_ids") or name.endswith(
                ("_input_ids", "task_inputs", "_token_ids")):
            return self.ids()
        if name in ("attention_mask", "decoder_attention_mask", "input_features_mask",
                    "past_values_padding", "audio_mel_mask", "padding_mask") or name.endswith("_attention_mask"):
            return self._mask(name)
        if name in ("token_type_ids", "lang_ids"):
            return t.zeros(BATCH, SEQ, dtype=t.long)
        if name == "bbox":
            corners = t.randint(0, 500, (BATCH, SEQ, 2), generator=self.gen)
            return t.cat([corners, corners + t.randint(1, 500, (BATCH, SEQ, 2), generator=self.gen)], -1)
        if name in ("grid_thw", "image_grid_thw", "video_grid_thw"):
            return self.grid()
        if name == "merge_sizes":
            return t.tensor([self.merge])
        if name == "spatial_shapes":
            return t.tensor([[4, 4]] * BATCH)
        if name == "pixel_attention_mask" and self.layout == "naflex":
            return t.ones(BATCH, 16, dtype=t.long)
        if self.layout != "image" and name in ("pixel_values", "hidden_states", "pixel_values_videos"):
            return self.patches()
        if name in ("pixel_values", "pixel_values_images", "prompt_pixel_values", "image", "images"):
            return self.randn(BATCH, self.channels, self.size, self.size)
        if name in ("pixel_values_videos", "videos", "video"):
            return self.video()
        if name == "prompt_masks":
            return t.ones(BATCH, self.channels, self.size, self.size)
        if name == "pixel_mask":
            return t.ones(BATCH, self.size, self.size, dtype=t.long)
        if name in ("input_values", "audio_values", "waveform", "raw_audio", "audio", "inputs"):
            return self.randn(BATCH, AUDIO_SAMPLES)
        if name in ("input_features", "audio_features", "input_speech"):
            return self.randn(BATCH, self.mels, self.mel_frames)
        if name == "audio_mel":
            return self.randn(BATCH, self.mel_frames, self.mels)
        if name == "past_values":
            return self.randn(*self.time_series())
        if name in ("past_observed_mask",):
            return t.ones(*self.time_series())
        if name == "past_time_features":
            shape = self.time_series()
            features = getattr(c, "num_time_features", 1)
            return self.randn(BATCH, shape[1], features if _is_int(features) else 1)
        if name == "freq":
            return t.zeros(BATCH, 1, dtype=t.long)
        if name in _HIDDEN:  # features another model would make: (batch, time, width)
            width = _find(c, "hidden_size", "d_model", "latent_dim", "codebook_dim", "hidden_dim",
                          "embed_dim", "n_embd", default=32)
            return self.randn(BATCH, SEQ, width)
        if name in ("visual_feats", "visual_pos"):  # LXMERT's region features and boxes
            size = _find(c, "visual_feat_dim" if name == "visual_feats" else "visual_pos_dim", default=4)
            return t.rand(BATCH, 4, size, generator=self.gen)
        return self._decision(name)

    def _mask(self, name):
        """All-ones masks sized like the input they mask."""
        t = self.torch
        if name == "input_features_mask":
            return t.ones(BATCH, self.mel_frames, dtype=t.long)
        if name == "audio_mel_mask":
            return t.zeros(BATCH, self.mel_frames, dtype=t.bool)
        if name == "past_values_padding":
            return t.zeros(*self.time_series()[:2], dtype=t.long)
        if name == "padding_mask":
            return t.ones(BATCH, AUDIO_SAMPLES, dtype=t.long)
        return t.ones(BATCH, SEQ, dtype=t.long)

    def _decision(self, name):
        """Decision Transformer's trajectories (states, actions, returns, timesteps)."""
        t, c = self.torch, self.config
        if name == "states" and _is_int(getattr(c, "state_dim", None)):
            return self.randn(BATCH, SEQ, c.state_dim)
        if name == "actions" and _is_int(getattr(c, "act_dim", None)):
            return self.randn(BATCH, SEQ, c.act_dim)
        if name in ("rewards", "returns_to_go"):
            return self.randn(BATCH, SEQ, 1)
        if name == "timesteps":
            return t.arange(SEQ).repeat(BATCH, 1)
        return None


_HIDDEN = ("latents", "hidden_states", "inputs_embeds", "encoder_hidden_states", "embeddings")
_WHEN_ACCEPTED = ("visual_feats", "visual_pos")  # optional in forward, needed all the same
_PARTNERS = {"pixel_values": ("image_grid_thw", "spatial_shapes", "pixel_attention_mask"),
             "hidden_states": ("grid_thw",), "pixel_values_videos": ("video_grid_thw",)}


def with_placeholders(inputs, config, count, kind="image"):
    """The inputs with `count` placeholder tokens of a kind (image, video, audio) at the start of
    each sample's token ids: what a multimodal model matches its features against."""
    import torch
    token = None
    for name in (f"{kind}_token_id", f"{kind}_token_index", f"{kind}_token"):
        for c in (config, getattr(config, "text_config", None)):
            if _is_int(getattr(c, name, None)):
                token = getattr(c, name)
                break
        if token is not None:
            break
    if token is None or "input_ids" not in inputs or count < 1:
        return None
    ids = inputs["input_ids"]
    per = -(-count // ids.shape[0])
    rest = ids[:, :max(SEQ - per, 2)]
    out = {**inputs, "input_ids": torch.cat([torch.full((ids.shape[0], per), token), rest], 1)}
    if "attention_mask" in inputs:
        out["attention_mask"] = torch.ones_like(out["input_ids"])
    return out


def _main_names(model):
    """The model's main input name(s), as a list."""
    names = getattr(model, "main_input_name", "input_ids")
    return [names] if isinstance(names, str) else list(names)


def input_candidates(model, config, forward=None, names=None):
    """Returns (the input dicts to try, in order; why there are none): the main input(s) and
    every required parameter of forward (the model's own by default) made from the config, the
    usual companions (attention mask, decoder ids, layout boxes, trajectories), then variants
    (video clips, channel-first audio, time-major features, text beside images)."""
    forward = forward or model.forward
    params = inspect.signature(forward).parameters
    maker = _Maker(config, params)
    names = names or _main_names(model)
    wanted = names + [n for n in required_params(forward) if n not in names]
    first = {}
    for name in wanted:
        value = maker.make(name)
        if value is None:
            return [], f"input {name!r} has no generator in the sweep"
        first[name] = value
    if "input_ids" in first and "attention_mask" in params:
        first["attention_mask"] = maker.make("attention_mask")
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        first["decoder_input_ids"] = maker.ids()
    if "bbox" in params and "input_ids" in first:
        first["bbox"] = maker.make("bbox")
    if names[0] == "states":
        for name in ("actions", "rewards", "returns_to_go", "timesteps", "attention_mask"):
            if name in params and maker.make(name) is not None:
                first[name] = maker.make(name)
    if names[0] == "past_values":
        for name in ("past_time_features", "past_observed_mask", "future_values"):
            if name in params and name not in first and name != "future_values":
                first[name] = maker.make(name)
    _partnered(first, params, maker)  # what a main input is read with
    for name in _WHEN_ACCEPTED:
        if name in params and name not in first:
            first[name] = maker.make(name)
    if "lang_ids" in params and "input_ids" in first:
        first["lang_ids"] = maker.make("lang_ids")
    return _variants(first, params, maker), ""


def _variants(first, params, maker):
    """The first candidate and its variants, in the order they are tried."""
    cands = [first]
    if "input_features" in first:
        cands.append({**first, "input_features": first["input_features"].transpose(1, 2).contiguous()})
    if "pixel_values" in first and first["pixel_values"].dim() == 4 and maker.layout == "image":
        cands.append({**first, "pixel_values": maker.video()})  # video models name them so too
        pair = maker.randn(BATCH, 2, maker.channels, maker.size, maker.size)
        cands.append({**first, "pixel_values": pair})  # image pairs (keypoint matching)
        line = maker.randn(BATCH, maker.channels, 2 * maker.size, 8 * maker.size)
        cands.append({**first, "pixel_values": line})  # text lines (OCR recognizers pool the height)
    if "past_values" in first and first["past_values"].dim() == 2:
        cands.append({k: (v.unsqueeze(-1) if k in ("past_values", "past_observed_mask") else v)
                      for k, v in first.items()})  # (batch, time, channels)
    if "input_features" in first:  # stacked frames (w2v-BERT: feature size x stride)
        cands.append({**first, "input_features": maker.randn(BATCH, maker.mel_frames, 2 * maker.mels)})
    if "input_values" in first and first["input_values"].dim() == 2:
        length = getattr(maker.config, "max_length", None)  # spectrogram patches (AST)
        frames = length if _is_int(length) and length <= 1024 else maker.mel_frames
        cands.append({**first, "input_values": maker.randn(BATCH, frames, maker.mels)})
        cands.append({**first, "input_values": maker.make("hidden_states")})  # no pre-net (SpeechT5)
    hidden = [n for n in _HIDDEN if n in first and first[n].dim() == 3]
    if hidden:  # ... or (batch, channels, time), as codec decoders take latents
        cands.append({k: (v.transpose(1, 2).contiguous() if k in hidden else v) for k, v in first.items()})
    for name in ("input_values", "inputs"):
        if name in first and first[name].dim() == 2:
            cands.append({**first, name: first[name].unsqueeze(1)})  # (batch, channels, samples)
            # Codecs that frame audio in hops of 1920 (or 960, 640, 480, 320) samples.
            cands.append({**first, name: maker.randn(BATCH, 1, 2 * 1920)})
            cands.append({**first, name: maker.randn(BATCH, 2 * 1920)})
    if "input_ids" not in first and "input_ids" in params and "pixel_values" in first:
        cands.append({**first, "input_ids": maker.ids()})
    if "pixel_values" not in first and "pixel_values" in params and "input_ids" in first:
        both = _partnered({**first, "pixel_values": maker.make("pixel_values")}, params, maker)
        cands.append(both)  # dual encoders (CLIP, SigLIP 2)
        if maker.layout == "image":
            cands.append({**both, "pixel_values": maker.video()})  # video-text (X-CLIP)
    for name in ("input_values", "input_features"):  # audio-text dual encoders (CLAP)
        if name not in first and name in params and "input_ids" in first:
            cands.append(_partnered({**first, name: maker.make(name)}, params, maker))
            features = maker.randn(BATCH, 1, maker.mel_frames, maker.mels)
            cands.append(_partnered({**first, name: features}, params, maker))  # (batch, 1, time, mels)
    return cands


def _partnered(inputs, params, maker):
    """The inputs with what their main inputs are read with (grids, NaFlex shapes and masks)."""
    for main, partners in _PARTNERS.items():
        if main in inputs:
            for name in partners:
                if name in params and name not in inputs:
                    inputs[name] = maker.make(name)
    return inputs


def moved(inputs, device):
    """The inputs with every tensor (in lists, tuples and dicts too) moved to a device."""
    import torch

    def move(value):
        """One value moved."""
        if isinstance(value, torch.Tensor):
            return value.to(device)
        if isinstance(value, (list, tuple)):
            return type(value)(move(v) for v in value)
        if isinstance(value, dict):
            return {k: move(v) for k, v in value.items()}
        return value
    return {k: move(v) for k, v in inputs.items()}


def widened(inputs):
    """The inputs with every floating tensor (at the top level) in float64."""
    import torch
    return {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for k, v in inputs.items()}
