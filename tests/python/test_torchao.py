"""TorchAO 0.18's low-precision recipes, unmodified, on a tiny Llama on neuron against the same
recipe on CPU, with the CPU fallback turned into an error: float8 training (tensor-wise and
row-wise, eager and compiled) and quantize_ inference (int8 weight-only, int8 dynamic activation +
int8 weight, float8 dynamic, int4 weight-only through CPU's packed format). docs/low-precision.md
says what TorchAO itself refuses off CUDA and how the tests get around it."""

import pytest
import torch

import torchneuron

torchao = pytest.importorskip("torchao")  # make test installs it (the stamp-frameworks rule)
transformers = pytest.importorskip("transformers")

from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: E402
from torchao.float8.float8_linear import Float8Linear  # noqa: E402
from torchao.quantization import (  # noqa: E402
    Float8DynamicActivationFloat8WeightConfig,
    Int8DynamicActivationInt8WeightConfig,
    Int8WeightOnlyConfig,
    PerRow,
    PerTensor,
    quantize_,
)

IDS = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))


@pytest.fixture(autouse=True)
def inductor_config_restored():
    """quantize_ tunes Inductor's process-wide config for quantized models; later tests get it back."""
    import torch._inductor.config as inductor_config

    saved = inductor_config.get_config_copy()
    yield
    inductor_config.load_config(saved)


@pytest.fixture
def fallback_is_an_error():
    """Any op that would fall back to the CPU raises instead; none may be counted either."""
    mode = torchneuron.fallback_mode()
    torchneuron.set_fallback_mode("error")
    torchneuron.reset_fallback_report()
    yield
    torchneuron.set_fallback_mode(mode)
    assert torchneuron.fallback_report() == {}


def tiny_llama(dtype=torch.float32, layers=2):
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                      max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(dtype)


def float8_training_losses(recipe, device, steps=2, compiled=False, layers=2):
    """Losses of `steps` AdamW steps of the tiny Llama whose decoder linears train in float8, and
    the gradients of the last layer's down_proj weight."""
    model = tiny_llama(layers=layers).to(device)
    convert_to_float8_training(model.model, config=Float8LinearConfig.from_recipe_name(recipe))
    assert isinstance(model.model.layers[0].mlp.up_proj, Float8Linear)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    run = torch.compile(model, backend="neuron") if compiled else model
    ids = IDS.to(device)
    losses, grads = [], []
    for _ in range(steps):
        loss = run(input_ids=ids, labels=ids).loss
        loss.backward()
        grads.append(model.model.layers[-1].mlp.down_proj.weight.grad.cpu())
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, torch.stack(grads)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_float8_training_matches_cpu(recipe, fallback_is_an_error):
    expected, expected_grads = float8_training_losses(recipe, "cpu")
    got, grads = float8_training_losses(recipe, "neuron")
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads, expected_grads, rtol=1e-3, atol=1e-5)
    model = tiny_llama()  # float8 changes the loss: the recipe really ran
    assert abs(model(input_ids=IDS, labels=IDS).loss.item() - expected[0]) > 1e-6


@pytest.mark.timeout(600)
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_float8_training_compiled_matches_cpu(recipe, fallback_is_an_error, fresh_compiler):
    # One layer (the compile of a cold cache is most of the time), against CPU eager (Inductor takes minutes).
    expected, expected_grads = float8_training_losses(recipe, "cpu", layers=1)
    got, grads = float8_training_losses(recipe, "neuron", compiled=True, layers=1)
    assert torchneuron.compile_stats()["graphs_compiled"] >= 1
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grads, expected_grads, rtol=1e-3, atol=1e-4)


def quantized_logits(config, device, dtype):
    model = tiny_llama(dtype).to(device).eval()
    quantize_(model.model, config)
    with torch.no_grad():
        return model(input_ids=IDS.to(device)).logits.float().cpu(), model.model.layers[0].mlp.up_proj


def assert_close_to_cpu_against_quantization_error(got, expected, dtype):
    """The model's logits differ from CPU's by a quarter of what quantizing moved them at most,
    beyond the difference the unquantized model shows (bfloat16 roundings upstream, which may also
    flip a dynamic activation's quantization step)."""
    model = tiny_llama(dtype).eval()
    with torch.no_grad():
        plain = model(input_ids=IDS).logits.float()
        noise = (model.to("neuron")(input_ids=IDS.to("neuron")).logits.float().cpu() - plain).abs()
    effect = (expected - plain).abs()
    difference = (got - expected).abs()
    assert difference.mean() < 0.25 * effect.mean() + 2 * noise.mean()
    assert difference.max() < effect.max() + 2 * noise.max()


def assert_quantized_like_cpu(config, dtype):
    expected, cpu_linear = quantized_logits(config, "cpu", dtype)
    got, linear = quantized_logits(config, "neuron", dtype)
    # The quantized weights (computed on each device from the same weights) are CPU's.
    assert type(linear.weight) is type(cpu_linear.weight)
    for name in linear.weight.tensor_data_names:
        assert torch.equal(getattr(linear.weight, name).cpu(), getattr(cpu_linear.weight, name)), name
    # One quantized linear on the same input: within one rounding of CPU's.
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(2)).to(dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)
    with torch.no_grad():
        torch.testing.assert_close(linear(x.to("neuron")).cpu(), cpu_linear(x), **tol)
    assert_close_to_cpu_against_quantization_error(got, expected, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int8_weight_only_matches_cpu(dtype, fallback_is_an_error):
    assert_quantized_like_cpu(Int8WeightOnlyConfig(), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int8_dynamic_activation_int8_weight_matches_cpu(dtype, fallback_is_an_error):
    assert_quantized_like_cpu(Int8DynamicActivationInt8WeightConfig(), dtype)


# TorchAO takes per-row float8 from bfloat16 weights only.
@pytest.mark.parametrize("granularity,dtype", [(PerTensor(), torch.float32), (PerTensor(), torch.bfloat16),
                                               (PerRow(), torch.bfloat16)], ids=["per_tensor_fp32", "per_tensor_bf16",
                                                                                 "per_row_bf16"])
def test_float8_dynamic_matches_cpu(granularity, dtype, monkeypatch, fallback_is_an_error):
    # TorchAO refuses float8 dynamic quantization unless CUDA sm89+, MI300 or XPU is present, on
    # CPU as on neuron; past that gate, the recipe's own code runs on both.
    from torchao.quantization import quant_api
    monkeypatch.setattr(quant_api, "_check_hardware_support", lambda granularity: None)
    assert_quantized_like_cpu(Float8DynamicActivationFloat8WeightConfig(granularity=granularity), dtype)


def test_float8_dynamic_is_refused_off_cuda_as_on_cpu():
    for device in ("cpu", "neuron"):
        with pytest.raises(AssertionError, match="requires CUDA compute capability"):
            quantize_(tiny_llama(torch.bfloat16).to(device).model,
                      Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))


class PackedInt4Linear(torch.nn.Module):
    """What TorchAO's CPU int4 weight (Int4OpaqueTensor) computes in F.linear, on any device: its
    packed weight and scales through _weight_int4pack_mm_for_cpu (TorchAO asserts a CPU input)."""

    def __init__(self, weight):
        super().__init__()
        self.register_buffer("packed", weight.qdata)
        self.register_buffer("scales_zeros", weight.scale_and_zero)
        self.group_size, self.out_features = weight.block_size[1], weight.shape[0]

    def forward(self, x):
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.reshape(-1, x.shape[-1]).contiguous(), self.packed,
                                                       self.group_size, self.scales_zeros)
        return y[:, :self.out_features].reshape(*x.shape[:-1], self.out_features)


def test_int4_weight_only_packed_on_cpu_runs_on_neuron(fallback_is_an_error):
    from torchao.prototype.quantization.int4.inference_workflow import PrototypeInt4WeightOnlyConfig
    model = tiny_llama(torch.bfloat16).eval()
    quantize_(model.model, PrototypeInt4WeightOnlyConfig(group_size=32))  # TorchAO's CPU int4 format
    with torch.no_grad():
        expected = model(input_ids=IDS).logits.float()
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, PackedInt4Linear(child.weight))
    with torch.no_grad():
        got = model.to("neuron")(input_ids=IDS.to("neuron")).logits.float().cpu()
    assert_close_to_cpu_against_quantization_error(got, expected, torch.bfloat16)


def test_int4_weight_only_packed_on_neuron_is_cpus(fallback_is_an_error):
    """TorchAO's tinygemm quantization primitives and the pack, run on neuron, give CPU's bytes."""
    from torchao.quantization.quant_primitives import (MappingType, _choose_qparams_affine_tinygemm,
                                                       _quantize_affine_tinygemm)
    from torchao.quantization.utils import pack_tinygemm_scales_and_zeros

    def pack(weight):
        scale, zero = _choose_qparams_affine_tinygemm(weight, MappingType.ASYMMETRIC, (1, 32), torch.int32, 0, 15,
                                                      1e-6, weight.dtype, weight.dtype)
        q = _quantize_affine_tinygemm(weight, (1, 32), scale, zero, torch.int32, 0, 15)
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
        return packed, pack_tinygemm_scales_and_zeros(scale.reshape(64, -1), zero.reshape(64, -1), scale.dtype)

    weight = torch.randn(64, 128, generator=torch.Generator().manual_seed(4)).bfloat16()
    packed, scales_zeros = pack(weight)
    got_packed, got_scales_zeros = pack(weight.to("neuron"))
    assert torch.equal(got_packed.cpu(), packed) and torch.equal(got_scales_zeros.cpu(), scales_zeros)
    x = torch.randn(4, 128).bfloat16()
    expected = torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, 32, scales_zeros)
    got = torch.ops.aten._weight_int4pack_mm_for_cpu(x.to("neuron"), got_packed, 32, got_scales_zeros)
    torch.testing.assert_close(got.cpu(), expected, rtol=1.6e-2, atol=1e-2)
    # Dequantized, the packed weight is the bf16 weight to within a quantization step (half a step
    # of rounding, and the bfloat16 scale and zero's own).
    eye = torch.eye(128, device="neuron").bfloat16()
    dequantized = torch.ops.aten._weight_int4pack_mm_for_cpu(eye, got_packed, 32, got_scales_zeros).cpu().t()
    groups = weight.float().reshape(64, 4, 32)
    step = (groups.amax(-1) - groups.amin(-1)) / 15
    assert ((dequantized.float().reshape(64, 4, 32) - groups).abs() <= step[..., None]).all()
