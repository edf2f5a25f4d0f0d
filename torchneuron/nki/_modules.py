"""install(): makes `import nki` and `import neuronxcc.nki` resolve to torchneuron.nki, unless a
real NKI installation provides them."""
from __future__ import annotations

import importlib.util
import sys
import types
import warnings

from . import collectives, compiler, constants, isa, language, neuron_dtypes, typing

_FAMILIES = {"nki": ["", ".language", ".isa", ".isa.constants", ".typing", ".compiler", ".collectives"],
             "neuronxcc": ["", ".nki", ".nki.language", ".nki.isa", ".nki.isa.constants", ".nki.typing", ".nki.compiler", ".nki.collectives"]}


def _real_installation(top: str) -> bool:
    """Whether `top` is importable and is not ours (PyPI's nki 0.0.1 placeholder raises ImportError)."""
    module = sys.modules.get(top)
    if module is not None:
        return not getattr(module, "__torchneuron__", False)
    if importlib.util.find_spec(top) is None:
        return False
    try:
        importlib.import_module(top)
    except ImportError:
        return False
    return True


def install() -> list[str]:
    """Registers the modules nki, nki.language, nki.isa (and nki.isa.constants), nki.typing,
    nki.compiler, neuronxcc.nki and its submodules as torchneuron's; returns the names it registered."""
    package = sys.modules[__package__]  # torchneuron.nki, which imports this module
    targets = {"": package, ".language": language, ".isa": isa, ".isa.constants": constants, ".typing": typing,
               ".compiler": compiler, ".collectives": collectives}
    registered = []
    for top, suffixes in _FAMILIES.items():
        if _real_installation(top):
            warnings.warn(f"torchneuron.nki.install: a real '{top}' is installed ({sys.modules[top].__file__}); "
                          f"torchneuron leaves it in place and does not provide '{top}'", stacklevel=2)
            continue
        for suffix in suffixes:
            name = top + suffix
            if top == "neuronxcc":
                module = types.ModuleType("neuronxcc") if suffix == "" else targets[suffix.replace(".nki", "", 1)]
                if suffix == "":
                    module.__torchneuron__ = True
                    module.nki = package
            else:
                module = targets[suffix]
            sys.modules[name] = module
            registered.append(name)
    if "nki" in registered:  # `import nki.dtype as nt`: the dtype class, its dtypes as attributes
        sys.modules["nki.dtype"] = package.dtype
        registered.append("nki.dtype")
    if not _real_installation("neuron_dtypes"):  # the NumPy dtype helpers AWS's kernels import
        neuron_dtypes.__torchneuron__ = True
        sys.modules["neuron_dtypes"] = neuron_dtypes
        registered.append("neuron_dtypes")
    package.__torchneuron__ = True
    return registered
