"""The kernel table at every instruction-set level this CPU has: bench_kernels.py once per level,
with torchneuron's kernels (TORCHNEURON_CPU_CAPABILITY) and CPU PyTorch, the reference
(ATEN_CPU_CAPABILITY), held to the same level. Writes build/bench.md and build/bench.png, and
names each family whose ratio at a lower level falls below half its ratio at the highest."""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from torchneuron import _cpu_dispatch  # noqa: E402  (no extension module needed for the probe)
from torchneuron.info import cpu_model  # noqa: E402

# Below the CPU's highest level, the BLAS libraries that pick their kernels from the CPU, not from
# ATEN_CPU_CAPABILITY, are held to the level too: OpenBLAS (our GEMMs) and MKL (CPU PyTorch's
# float GEMMs); their lowest settings are a little above the x86-64 baseline (SSE3, SSE4.2).
# oneDNN (CPU's convolutions and bfloat16 GEMMs) is not: held below AVX-512 on a CPU that has
# AVX512-BF16, CPU PyTorch still sends bfloat16 GEMMs to it, which then runs its reference code
# (2.4 s for 1024^3), as no AVX2 machine would. So CPU's convolutions and bfloat16 GEMMs keep
# the CPU's highest level, which only lowers our ratios.
HELD_TO_LEVEL = {
    "avx2": dict(OPENBLAS_CORETYPE="Haswell", MKL_ENABLE_INSTRUCTIONS="AVX2"),
    "default": dict(OPENBLAS_CORETYPE="Prescott", MKL_ENABLE_INSTRUCTIONS="SSE4_2"),
}


def run_level(level, out_dir, highest):
    """Runs bench_kernels.py at `level`; returns its JSON."""
    path = os.path.join(out_dir, f"{level}.json")
    env = dict(os.environ, TORCHNEURON_CPU_CAPABILITY=level, ATEN_CPU_CAPABILITY=level)
    if level != highest:
        env.update(HELD_TO_LEVEL[level])
    print(f"== kernel table at {level}", flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "bench_kernels.py"), "--json", path], env=env, check=True)
    with open(path) as f:
        return json.load(f)


def markdown(results, levels, low_rows):
    """The table of neuron / CPU ratios per level, as Markdown."""
    lines = ["| kernel family | " + " | ".join(f"{level} (neuron/cpu)" for level in levels) + " |",
             "| --- | " + " | ".join("---:" for _ in levels) + " |"]
    names = [row[0] for row in results[levels[0]]["rows"]]
    for i, name in enumerate(names):
        cells = []
        for level in levels:
            _, cpu, neuron = results[level]["rows"][i]
            mark = " ⚠" if (level, name) in low_rows else ""
            cells.append(f"{cpu / neuron:.2f}x{mark}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results, levels, path):
    """A horizontal bar chart of the ratios, one bar per level and family (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    names = [row[0] for row in results[levels[0]]["rows"]]
    fig, ax = plt.subplots(figsize=(10, 0.22 * len(names) * len(levels) + 1.5))
    height = 0.8 / len(levels)
    for k, level in enumerate(levels):
        ratios = [cpu / neuron for _, cpu, neuron in results[level]["rows"]]
        ax.barh([i + k * height for i in range(len(names))], ratios, height=height, label=level)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(names))], names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("neuron / CPU PyTorch throughput (log scale; right of 1 is faster than CPU)")
    ax.legend(title="instruction-set level")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main():
    """Runs every supported level, prints the combined table, writes build/bench.md and .png."""
    highest = _cpu_dispatch.highest_supported()
    levels = [level for level in reversed(_cpu_dispatch.LEVELS)
              if _cpu_dispatch.LEVELS.index(level) <= _cpu_dispatch.LEVELS.index(highest)]
    built = [level for level in levels if os.path.exists(os.path.join(ROOT, "torchneuron", "lib", level))]
    missing = sorted(set(levels) - set(built))
    if missing:
        print(f"not built here, skipped: {', '.join(missing)} (build with TORCHNEURON_CPU_LEVELS=supported)")
    with tempfile.TemporaryDirectory() as tmp:
        results = {level: run_level(level, tmp, highest) for level in built}
    top = built[0]
    low_rows = set()
    for level in built[1:]:
        for (name, cpu_top, neuron_top), (_, cpu, neuron) in zip(results[top]["rows"], results[level]["rows"]):
            if cpu / neuron < 0.5 * (cpu_top / neuron_top):
                low_rows.add((level, name))
    table = markdown(results, built, low_rows)
    print("\n" + table)
    if low_rows:
        print(f"\n⚠ below half their {top} ratio: " + "; ".join(f"{name} at {level}" for level, name in sorted(low_rows)))
    os.makedirs(os.path.join(ROOT, "build"), exist_ok=True)
    with open(os.path.join(ROOT, "build", "bench.md"), "w") as f:
        f.write(f"Kernel families, neuron / CPU PyTorch throughput at each level (both held to it); "
                f"CPU: {cpu_model()}, {os.cpu_count()} cores. ⚠: below half the {top} ratio.\n\n{table}\n")
    print(f"wrote {os.path.join(ROOT, 'build', 'bench.md')}")
    plot(results, built, os.path.join(ROOT, "build", "bench.png"))


if __name__ == "__main__":
    main()
