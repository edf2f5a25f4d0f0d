"""torchneuron.nki's modules import each other in one direction (a layered order, no cycles) with
top-level imports only, and each imports on its own in a fresh interpreter."""
import ast
import graphlib
import json
import pathlib
import subprocess
import sys

import pytest

import torchneuron.nki
from torchneuron.nki import _tensor

PACKAGE = pathlib.Path(torchneuron.nki.__file__).parent


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(module: str, node) -> list:
    """The torchneuron.nki modules an import statement of `module` names."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif node.level:
        base = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(base + ([node.module] if node.module else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    else:
        names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module for a in node.names]
    return [n for n in names if n in MODULES and n != module]


def _imports(module: str):
    """(modules imported at top level, modules imported inside functions or classes)."""
    tree = ast.parse(MODULES[module].read_text())
    top = {n for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)) for n in _imported(module, node)}
    nested = {n for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)) and node not in tree.body
              for n in _imported(module, node)}
    return top, nested


def test_the_import_graph_is_acyclic():
    graph = {m: _imports(m)[0] for m in MODULES}
    assert "torchneuron.nki._ops" in graph["torchneuron.nki.language"]  # the parser sees relative imports
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"torchneuron.nki imports in a cycle: {' -> '.join(e.args[1])}")
    assert set(order) == set(MODULES)


def test_no_function_local_imports_between_nki_modules():
    nested = {m: sorted(_imports(m)[1]) for m in MODULES}
    assert {m: n for m, n in nested.items() if n} == {}


def test_core_layers_do_not_import_the_surfaces():
    """The tracer/executor core, the tile ops and the instruction modules sit below nl and nisa."""
    surfaces = {"torchneuron.nki.language", "torchneuron.nki.isa", "torchneuron.nki"}
    core = ["_errors", "_current", "_dtypes", "_expr", "_indices", "_tensor", "_capacity", "_context", "_ops",
            "_isa_matrix", "_isa_core", "_isa_indirect", "_isa_bytes", "_isa_mx", "_lockstep", "_kernel"]
    graph = {m: _imports(m)[0] for m in MODULES}
    for name in core:
        seen, todo = set(), [f"torchneuron.nki.{name}"]
        while todo:
            for dep in graph[todo.pop()] - seen:
                seen.add(dep)
                todo.append(dep)
        assert not seen & surfaces, (name, sorted(seen & surfaces))


def test_every_tile_extension_is_provided():
    """Lower layers reach the tile ops and the special views only through _tensor.extensions."""
    missing = [n for n in _tensor.extensions.NAMES if n not in vars(_tensor.extensions)]
    assert missing == []
    with pytest.raises(TypeError):
        _tensor.extensions.provide(no_such_entry=print)


# One process imports torchneuron (and so torch) once, then forks a child per module: the child
# stands in an empty torchneuron.nki package (its __init__ would import every module) and imports
# that one module, which must bring in everything it needs itself.
_ISOLATED = """
import importlib, json, os, sys, traceback, types
import torchneuron
assert "torchneuron.nki" not in sys.modules
results = {}
for name in sys.argv[1:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        package = types.ModuleType("torchneuron.nki")
        package.__path__ = [os.path.join(torchneuron.__path__[0], "nki")]
        sys.modules["torchneuron.nki"] = package
        try:
            importlib.import_module(name)
            report = sorted(m for m in sys.modules if m.startswith("torchneuron.nki."))
        except BaseException:
            report = traceback.format_exc()
        os.write(write, json.dumps(report).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        results[name] = json.loads(f.read() or '"no report"')
    os.waitpid(pid, 0)
print(json.dumps(results))
"""


def test_each_module_imports_alone():
    names = sorted(m for m in MODULES if m != "torchneuron.nki")
    result = subprocess.run([sys.executable, "-c", _ISOLATED, *names], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    failed = {name: report for name, report in loaded.items() if isinstance(report, str)}
    assert failed == {}
    assert loaded["torchneuron.nki._errors"] == ["torchneuron.nki._errors"]  # alone: nothing else was loaded
    assert "torchneuron.nki.language" not in loaded["torchneuron.nki._ops"]
