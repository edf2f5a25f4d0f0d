"""TorchTitan configs for neuron, made of TorchTitan's own parts (pass --module neuron_configs with
this folder on PYTHONPATH): llama3's float8 debug config with the variable-length attention that
runs on neuron (its FlexAttention does not), as llama3_debugmodel_varlen_attn is to
llama3_debugmodel."""
from torchtitan.components.quantization import Float8LinearConverter
from torchtitan.models.llama3 import model_registry
from torchtitan.models.llama3.config_registry import llama3_debugmodel_varlen_attn


def llama3_debugmodel_varlen_attn_float8():
    """llama3_debugmodel_float8 (Float8Linear, TorchAO's row-wise recipe) with varlen attention."""
    config = llama3_debugmodel_varlen_attn()
    compiled = config.compile.enable and "model" in config.compile.components
    config.model_spec = model_registry(
        "debugmodel", attn_backend="varlen",
        converters=[Float8LinearConverter.Config(model_compile_enabled=compiled)])
    return config
