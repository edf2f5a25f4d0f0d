"""Dynamo's DeviceInterface for neuron, registered when torch._dynamo is first imported.

Importing torch._dynamo costs over a second, so `import torch` must not pay for it: a finder on
sys.meta_path registers the interface right after torch._dynamo.device_interface loads.
"""

import importlib.abc
import importlib.util
import sys

_TARGET = "torch._dynamo.device_interface"


def _make_interface_class(device_interface_module):
    import torch

    from torchneuron import neuron

    base = device_interface_module.DeviceInterface

    class NeuronInterface(base):
        """How Dynamo and Inductor talk to the neuron device."""

        device = neuron.device
        Event = neuron.Event
        Stream = neuron.Stream

        class Worker:
            """Device queries that are safe in compile worker processes."""

            @staticmethod
            def set_device(device):
                neuron.set_device(device)

            @staticmethod
            def current_device():
                return neuron.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return neuron.get_device_properties(device)

        current_device = staticmethod(neuron.current_device)
        set_device = staticmethod(neuron.set_device)
        device_count = staticmethod(neuron.device_count)
        is_available = staticmethod(neuron.is_available)
        stream = staticmethod(neuron.stream)
        current_stream = staticmethod(neuron.current_stream)
        set_stream = staticmethod(neuron.set_stream)
        synchronize = staticmethod(neuron.synchronize)
        get_device_properties = staticmethod(neuron.get_device_properties)
        memory_allocated = staticmethod(neuron.memory_allocated)

        @staticmethod
        def maybe_exchange_device(device):
            previous = neuron.current_device()
            if device >= 0 and device != previous:
                neuron.set_device(device)
            return previous

        @staticmethod
        def exchange_device(device):
            previous = neuron.current_device()
            neuron.set_device(device)
            return previous

        @staticmethod
        def _set_stream_by_id(stream_id, device_index, device_type):
            neuron.set_stream(
                neuron.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
            )

        @staticmethod
        def get_raw_stream(device_idx):
            return neuron.current_stream(device_idx).stream_id

        @staticmethod
        def get_compute_capability(device=None):
            major, minor = neuron.get_device_capability(device)
            return major * 10 + minor

        @staticmethod
        def is_bf16_supported(including_emulation=False):
            return True

        @staticmethod
        def is_dtype_supported(dtype, including_emulation=False):
            return dtype not in (torch.float8_e4m3fn, torch.float8_e5m2)

    return NeuronInterface


def _register(device_interface_module):
    device_interface_module.register_interface_for_device(
        "neuron", _make_interface_class(device_interface_module)
    )


class _RegisterAfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Wraps the loader of module `target` to call `register(module)` after it runs."""

    def __init__(self, target, register):
        self.target = target
        self.register = register

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            self.register(module)

        spec.loader.exec_module = exec_module
        return spec


def _register_backend(registry_module):
    from torchneuron.compiler import neuron_backend

    if "neuron" not in registry_module._BACKENDS:
        registry_module.register_backend(name="neuron", compiler_fn=neuron_backend)


def _when_loaded(target, register):
    if target in sys.modules:
        register(sys.modules[target])
    else:
        sys.meta_path.insert(0, _RegisterAfterImport(target, register))


# Generator state lives outside the graph, as torch.cuda's does: AOTAutograd would drop these
# calls, so Dynamo must break the graph and run them eagerly, which it does for functions marked
# skipped (the same rule its trace_rules give torch.cuda's RNG functions).
_RNG_STATE_FUNCTIONS = ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
                        "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all")


def _skip_rng_state_functions(decorators_module):
    from torchneuron import neuron

    for name in _RNG_STATE_FUNCTIONS:
        decorators_module.skip(getattr(neuron, name))


def register_when_dynamo_loads():
    """Registers the device interface and the "neuron" compile backend now if Dynamo is loaded,
    or as soon as it is (the backend is also an entry point of the torch_dynamo_backends group),
    and keeps torch.neuron's generator-state functions out of Dynamo's graphs."""
    _when_loaded(_TARGET, _register)
    _when_loaded("torch._dynamo.decorators", _skip_rng_state_functions)
    _when_loaded("torch._dynamo.backends.registry", _register_backend)
