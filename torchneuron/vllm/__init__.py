"""vLLM on neuron: a platform plugin that vLLM finds through the `vllm.platform_plugins` entry
point, so installing torchneuron beside vLLM is all a user does (docs/serving.md).

The plugin is active unless TORCHNEURON_VLLM=0; set that, or VLLM_PLUGINS to a list without
"neuron", to run vLLM's own CPU platform in the same environment."""

import os


def register():
    """vLLM's platform-plugin hook: the platform class's qualified name, or None when inactive."""
    if os.environ.get("TORCHNEURON_VLLM", "1") == "0":
        return None
    return "torchneuron.vllm.platform.NeuronPlatform"
