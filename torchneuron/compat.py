"""Compatibility with the training frameworks, kept in one place, each applied when the framework
is imported in a process that loaded torchneuron:

- torchtitan 0.3.0 on torch 2.13: shims that add what torch 2.13 lacks (each does nothing where
  torch has it, and says which torch makes it unnecessary). Tested in tests/python/test_titan.py.
  Its float8 converters admit only CUDA SM89+ / MI300+ (torch.cuda's capability); on a neuron
  run they also admit our device when it multiplies float8 natively (aten::_scaled_mm has a
  neuron kernel). Upstream, that gate would ask the training device, not torch.cuda.
- Accelerate (1.16) and transformers (5.24) find the neuron device only when AWS's `torch_neuronx`
  package is installed; their is_neuron_available() / is_torch_neuron_available() also answer
  True here when torch.neuron is ours. Accelerate also takes a neuron process's device to be
  torch.neuron.current_device() (AWS's runtime shows each process its own core as device 0);
  here each process takes device local_rank % device_count, as CUDA processes do. Upstream, both
  would need to ask torch (torch.neuron.is_available(), or torch.accelerator) instead of looking
  for that package, and Accelerate to pick the device index by local rank for neuron too.
  Tested in tests/python/test_hf_trainer.py."""
from __future__ import annotations

import torch

APPLIED: list[str] = []


def _set_timeout() -> None:
    # torchtitan 0.3.0 calls torch.distributed.set_timeout(timeout, group) after its first step;
    # torch 2.13 has it as the private _set_pg_timeout (same arguments). Unneeded on torch
    # builds that export set_timeout (the nightlies torchtitan 0.3.0 was developed against).
    import torch.distributed as dist

    if not hasattr(dist, "set_timeout") and hasattr(dist.distributed_c10d, "_set_pg_timeout"):
        dist.set_timeout = dist.distributed_c10d._set_pg_timeout
        APPLIED.append("torch.distributed.set_timeout")


def apply(_torchtitan_module=None) -> list[str]:
    """Applies every shim torch 2.13 needs; returns the names of those applied."""
    if torch.distributed.is_available():
        _set_timeout()
    return list(APPLIED)


def _float8_gate(float8_module) -> None:
    """TorchTitan's float8 converters check has_cuda_capability(8, 9) (CUDA GPUs with float8
    tensor cores); on a run whose device is neuron, answer whether neuron has native float8 GEMMs."""
    original = float8_module.has_cuda_capability

    def has_cuda_capability(major: int, minor: int) -> bool:
        if original(major, minor):
            return True
        from torchtitan.tools import utils
        return (utils.device_type == "neuron" and _ours_available(check_device=True)
                and torch._C._dispatch_has_kernel_for_dispatch_key("aten::_scaled_mm", "PrivateUse1"))

    has_cuda_capability.__doc__ = "CUDA's SM check, or native float8 GEMMs on a neuron run (torchneuron.compat)."
    float8_module.has_cuda_capability = has_cuda_capability
    APPLIED.append("torchtitan float8 converters: neuron's float8 GEMMs")


def _ours_available(check_device=False) -> bool:
    import torchneuron.neuron
    return getattr(torch, "neuron", None) is torchneuron.neuron and (not check_device or torch.neuron.is_available())


def _also_ours(module, name: str) -> None:
    """Wraps module.name (a package check for torch_neuronx) to answer True for our device too."""
    original = getattr(module, name)

    def check(check_device=False):
        return original(check_device) or _ours_available(check_device)

    check.__doc__ = f"{name}, or True when torch.neuron is torchneuron's (torchneuron.compat)."
    setattr(module, name, check)
    APPLIED.append(f"{module.__name__}.{name}")


def _accelerate_device_per_rank(state_module) -> None:
    cls = state_module.PartialState
    original = cls.set_device

    def set_device(self):
        original(self)
        distributed = self.distributed_type != state_module.DistributedType.NO
        if distributed and self.device is not None and self.device.type == "neuron" and _ours_available():
            index = self.local_process_index % torch.neuron.device_count()
            torch.neuron.set_device(index)
            self.device = torch.device("neuron", index)

    cls.set_device = set_device
    APPLIED.append("accelerate PartialState.set_device")


def apply_when_frameworks_load() -> None:
    """Runs apply() when torchtitan is imported and teaches Accelerate our device when it is (now,
    for either one already imported)."""
    from torchneuron._dynamo_interface import _when_loaded

    _when_loaded("torchtitan", apply)
    _when_loaded("torchtitan.components.quantization.float8", _float8_gate)
    _when_loaded("accelerate.utils.imports", lambda m: _also_ours(m, "is_neuron_available"))
    _when_loaded("accelerate.state", _accelerate_device_per_rank)
    _when_loaded("transformers.utils.import_utils", lambda m: _also_ours(m, "is_torch_neuron_available"))
