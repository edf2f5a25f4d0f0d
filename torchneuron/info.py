"""python -m torchneuron.info: what this installation is, for bug reports (as torch.utils.collect_env
is for PyTorch): versions, devices and their memory, the CPU and the instruction-set level chosen,
the TORCHNEURON_* settings, the compile cache, native op count. --json prints it as JSON."""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys


def _first_line(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unavailable"


def cpu_model():
    """The CPU's model name, from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _directory_size(path):
    files = total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(root, name))
                files += 1
            except OSError:
                pass
    return files, total


def collect() -> dict:
    """Everything the report shows, as plain data."""
    import torch
    import torchneuron
    from torchneuron import _cpu_dispatch, compiler

    def version(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    devices = []
    for index in range(torch.neuron.device_count()):
        props = torch.neuron.get_device_properties(index)
        devices.append({"name": f"neuron:{index}", "memory_gib": round(props.total_memory / 2**30, 2),
                        "allocated_bytes": torch.neuron.memory_allocated(index),
                        "reserved_bytes": torch.neuron.memory_reserved(index)})
    cache = os.path.dirname(compiler.cache_dir())
    files, size = _directory_size(cache)
    return {
        "torchneuron": version("torchneuron"), "torch": torch.__version__, "python": sys.version.split()[0],
        "platform": platform.platform(), "compiler (CXX)": _first_line([os.environ.get("CXX") or "c++", "--version"]),
        "cpu": cpu_model(), "cpu cores": os.cpu_count(),
        "cpu levels built": _cpu_dispatch._available(), "cpu level highest supported": _cpu_dispatch.highest_supported(),
        "cpu level running": torchneuron.cpu_capability(),
        "devices": devices,
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("TORCHNEURON_", "NEURON_"))},
        "compile cache": {"path": cache, "files": files, "bytes": size},
        "native ops": len(torchneuron.native_ops()),
        "fallback mode": torchneuron.fallback_mode(),
        "distributed backend registered": "neuron" in torch.distributed.Backend.backend_list
        if torch.distributed.is_available() else False,
        "transformers": version("transformers"),
    }


def format_report(info: dict) -> str:
    lines = []
    for key, value in info.items():
        if key == "devices":
            lines.append(f"devices: {len(value)}")
            for d in value:
                lines.append(f"  {d['name']}: {d['memory_gib']} GiB, allocated {d['allocated_bytes']} B, "
                             f"reserved {d['reserved_bytes']} B")
        elif key == "environment":
            lines.append("environment: " + (", ".join(f"{k}={v}" for k, v in value.items()) or "(no TORCHNEURON_* set)"))
        elif key == "compile cache":
            lines.append(f"compile cache: {value['path']} ({value['files']} files, {value['bytes'] / 2**20:.1f} MiB)")
        elif isinstance(value, list):
            lines.append(f"{key}: {', '.join(map(str, value))}")
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torchneuron.info", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    info = collect()
    print(json.dumps(info, indent=2) if args.json else format_report(info))


if __name__ == "__main__":
    main()
