"""python -m torchneuron.check SCRIPT [args]: will my model run well on neuron?

Runs a training or inference script on the neuron device and reports what keeps it from running
natively: every CPU fallback with its count and the line of its first call, host synchronizations
(.item(), .cpu(), printing, data-dependent shapes) per step with their lines, under --compile the
graphs, graph breaks and recompilations, peak device memory, time per step on neuron against the
same script on CPU, whether a step could be captured as a graph (torch.neuron.graph) and why not,
and a one-line verdict. A step is an optimizer step (or, for a script without
an optimizer, the whole run). --device-map cuda=neuron runs a script written for CUDA.

Writes the report as PREFIX.json and PREFIX.md (--output PREFIX, default torchneuron-check)."""
from __future__ import annotations

import argparse
import json
import logging
import os
import runpy
import subprocess
import sys
import time
import traceback
import warnings

import torch
from torch.overrides import TorchFunctionMode

# Frames that are not the user's: torchneuron, torch and the standard library.
_SELF_FILES = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(torch.__file__)),
               os.path.dirname(os.path.abspath(os.__file__)))

# Tensor methods that wait for the device and bring data to the host.
_SYNC_METHODS = {
    torch.Tensor.item: ".item()", torch.Tensor.tolist: ".tolist()", torch.Tensor.cpu: ".cpu()",
    torch.Tensor.numpy: ".numpy()", torch.Tensor.__bool__: "bool(tensor)", torch.Tensor.__float__: "float(tensor)",
    torch.Tensor.__int__: "int(tensor)", torch.Tensor.__repr__: "printing", torch.Tensor.__format__: "printing",
    torch.Tensor.nonzero: "nonzero (data-dependent shape)", torch.nonzero: "nonzero (data-dependent shape)",
    torch.masked_select: "masked_select (data-dependent shape)", torch.unique: "unique (data-dependent shape)",
    torch.Tensor.unique: "unique (data-dependent shape)", torch.Tensor.__index__: "index(tensor)",
}


def user_site() -> str:
    """The innermost frame outside torch and torchneuron, as "file:line"."""
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_SELF_FILES) and not frame.filename.startswith("<"):
            return f"{frame.filename}:{frame.lineno}"
    return "(no Python frame: the autograd engine's backward pass)"


def parse_device_map(text: str) -> dict:
    mapping = {}
    for pair in filter(None, (text or "").split(",")):
        source, _, target = pair.partition("=")
        if not target:
            raise SystemExit(f"torchneuron.check: --device-map takes from=to pairs such as cuda=neuron, got {pair!r}")
        mapping[source.strip()] = target.strip()
    return mapping


def _map_device(value, mapping):
    if isinstance(value, torch.device) and value.type in mapping:
        return torch.device(mapping[value.type], value.index) if mapping[value.type] != "cpu" else torch.device("cpu")
    if isinstance(value, str):
        kind, _, index = value.partition(":")
        if kind in mapping:
            return mapping[kind] + (f":{index}" if index and mapping[kind] != "cpu" else "")
    if isinstance(value, int) and not isinstance(value, bool) and "cuda" in mapping:
        return value  # an index: keeps meaning the target's device of that index
    return value


class Observer(TorchFunctionMode):
    """Counts host synchronizations on neuron tensors and rewrites device arguments (--device-map)."""

    def __init__(self, mapping, device_type):
        super().__init__()
        self.mapping, self.device_type = mapping, device_type
        self.syncs = {}  # (kind, site) -> count

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():  # Dynamo traces this: keep its graphs as they were
            return func(*args, **kwargs)
        if self.mapping:
            if func is torch.Tensor.cuda:
                func, args = torch.Tensor.to, (args[0], self.mapping.get("cuda", "cuda"))
            if "device" in kwargs:
                kwargs = dict(kwargs, device=_map_device(kwargs["device"], self.mapping))
            if func in (torch.Tensor.to,) and len(args) > 1:
                args = (args[0], _map_device(args[1], self.mapping)) + tuple(args[2:])
        kind = _SYNC_METHODS.get(func)
        if kind is not None and args and isinstance(args[0], torch.Tensor) and args[0].device.type == self.device_type:
            key = (kind, user_site())
            self.syncs[key] = self.syncs.get(key, 0) + 1
        return func(*args, **kwargs)


def _patch_cuda(mapping):
    """torch.cuda calls a CUDA script makes, answered by the target device's module."""
    target = mapping.get("cuda")
    if target is None:
        return
    module = getattr(torch, target, None) if target != "cpu" else None
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = (lambda: module.device_count()) if module else (lambda: 1)
    for name in ("synchronize", "manual_seed", "manual_seed_all", "current_device", "set_device", "empty_cache",
                 "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "get_device_name"):
        if module is not None and hasattr(module, name):
            setattr(torch.cuda, name, getattr(module, name))
        elif module is None:
            setattr(torch.cuda, name, lambda *a, **k: 0)


class StepClock:
    """Optimizer steps as step boundaries: the time of each, the device synchronized at its end."""

    def __init__(self, device_type):
        self.device_type = device_type
        self.times = []
        self.last = time.perf_counter()
        self.not_capturable = {}  # optimizer class -> why its step cannot be captured
        from torch.optim.optimizer import register_optimizer_step_post_hook
        register_optimizer_step_post_hook(self.on_step)

    def on_step(self, optimizer, args, kwargs):
        if optimizer.defaults.get("capturable") is False:
            name = type(optimizer).__name__
            self.not_capturable[name] = (f"{name} runs with capturable=False: its step reads the step count on the "
                                         "host; pass capturable=True")
        if self.device_type == "neuron":
            torch.neuron.synchronize()
        now = time.perf_counter()
        self.times.append(now - self.last)
        self.last = now


class CompileLog(logging.Handler):
    """Dynamo's graph-break and recompile messages (torch._logging artifacts)."""

    def __init__(self):
        super().__init__()
        self.graph_breaks, self.recompiles = [], []

    def emit(self, record):
        text = record.getMessage()
        if "Graph break" in text or "graph break" in text:
            self.graph_breaks.append(text.strip().splitlines()[0:6])
        elif "Recompiling" in text or "recompil" in text:
            self.recompiles.append(text.strip().splitlines()[0:4])


def _route_compile_to_neuron():
    original = torch.compile

    def compile_on_neuron(model=None, *, backend="inductor", **kwargs):
        backend = "neuron" if backend == "inductor" else backend
        if model is None:
            return lambda m: original(m, backend=backend, **kwargs)
        return original(model, backend=backend, **kwargs)
    torch.compile = compile_on_neuron


def run_script(script, script_args, mapping, device_type, compile_mode):
    """Runs the script in this process under the observers; returns the raw measurements."""
    import torchneuron
    if device_type == "neuron":
        torchneuron.reset_fallback_report()
        torchneuron.set_fallback_mode("warn")
        torch.neuron.reset_peak_memory_stats()
    _patch_cuda(mapping)
    fallback_sites = {}
    show = warnings.showwarning

    def capture(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "has no native neuron kernel" in text:
            op = text.split("Operator ", 1)[-1].split(" ", 1)[0].strip("'")
            fallback_sites.setdefault(op, user_site())
        else:
            show(message, category, filename, lineno, file, line)
    warnings.showwarning = capture
    log = CompileLog()
    if compile_mode:
        _route_compile_to_neuron()
        torch._logging.set_logs(graph_breaks=True, recompiles=True)
        for name in ("torch._dynamo", "torch.__graph_breaks", "torch.__recompiles"):
            logging.getLogger(name).addHandler(log)
    clock = StepClock(device_type)
    observer = Observer(mapping, device_type)
    sys.argv = [script] + list(script_args)
    start = time.perf_counter()
    error = None
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = capture
        with observer:
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exit_:
                if exit_.code not in (None, 0):
                    error = f"the script exited with status {exit_.code}"
            except Exception as exc:  # noqa: BLE001 - reported, not raised
                error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if device_type == "neuron":
        torch.neuron.synchronize()
    total = time.perf_counter() - start
    result = {"seconds": total, "step_seconds": clock.times, "error": error}
    if device_type == "neuron":
        counts = torchneuron.fallback_report()
        result["fallbacks"] = [{"op": op, "calls": n, "first_call": fallback_sites.get(op, "?")}
                               for op, n in sorted(counts.items(), key=lambda kv: -kv[1])]
        result["syncs"] = [{"kind": kind, "site": site, "count": n}
                           for (kind, site), n in sorted(observer.syncs.items(), key=lambda kv: -kv[1])]
        result["peak_memory_bytes"] = torch.neuron.max_memory_allocated()
        result["graph_capture"] = graph_capture_blockers(result, clock)
        if compile_mode:
            stats = torchneuron.compile_stats()
            result["compile"] = {"graphs": stats["graphs_compiled"], "graph_breaks": log.graph_breaks,
                                 "recompiles": log.recompiles, "ops_lowered": stats["ops_lowered"],
                                 "ops_eager": stats["ops_eager"]}
    return result


def graph_capture_blockers(result, clock) -> list[str]:
    """Why a step could not be captured as a graph (torch.neuron.graph / make_graphed_callables)
    and replayed: what a capture refuses, seen in the run. Empty: it could be."""
    steps = max(1, len(clock.times))
    blockers = [f"CPU fallback {f['op']} (first at {f['first_call']})" for f in result["fallbacks"]]
    blockers += [f"host synchronization {s['kind']} at {s['site']}" for s in result["syncs"] if s["count"] >= steps]
    blockers += list(clock.not_capturable.values())
    return blockers


def step_time(result):
    """Median seconds per step (steps after the first), or the whole run for a script without steps."""
    times = result["step_seconds"][1:] or result["step_seconds"]
    if not times:
        return result["seconds"]
    times = sorted(times)
    return times[len(times) // 2]


def verdict(report) -> str:
    neuron = report["neuron"]
    if neuron["error"]:
        return f"does not run on neuron: {neuron['error']}"
    problems = []
    if neuron["fallbacks"]:
        problems.append(f"{len(neuron['fallbacks'])} op(s) fall back to the CPU")
    steps = max(1, len(neuron["step_seconds"]))
    syncs = sum(s["count"] for s in neuron["syncs"]) / steps
    if syncs >= 1:
        problems.append(f"{syncs:.1f} host synchronization(s) per step")
    if neuron.get("compile", {}).get("graph_breaks"):
        problems.append(f"{len(neuron['compile']['graph_breaks'])} graph break(s)")
    speed = ""
    if report.get("cpu") and not report["cpu"]["error"]:
        ratio = step_time(report["cpu"]) / max(step_time(neuron), 1e-9)
        speed = f"; {ratio:.2f}x the speed of CPU PyTorch per step"
    if not problems:
        return "runs natively on neuron: no CPU fallbacks, no per-step host synchronizations" + speed
    return "runs on neuron with " + ", ".join(problems) + speed


def markdown(report) -> str:
    neuron = report["neuron"]
    lines = [f"# torchneuron check: {report['script']}", "", f"**{report['verdict']}**", ""]
    lines += ["| measure | value |", "| --- | --- |",
              f"| steps (optimizer steps) | {len(neuron['step_seconds'])} |",
              f"| time per step on neuron | {step_time(neuron) * 1e3:.2f} ms |"]
    if report.get("cpu"):
        lines.append(f"| time per step on CPU | {step_time(report['cpu']) * 1e3:.2f} ms |")
    lines.append(f"| peak device memory | {neuron['peak_memory_bytes'] / 2**20:.1f} MiB |")
    lines += ["", "## Graph capture", "", _graph_capture_line(neuron)]
    lines += ["", "## CPU fallbacks", ""]
    lines += ["| op | calls | first call |", "| --- | --- | --- |"] + [
        f"| `{f['op']}` | {f['calls']} | {f['first_call']} |" for f in neuron["fallbacks"]] if neuron["fallbacks"] \
        else ["none"]
    lines += ["", "## Host synchronizations", ""]
    lines += ["| kind | where | count |", "| --- | --- | --- |"] + [
        f"| {s['kind']} | {s['site']} | {s['count']} |" for s in neuron["syncs"]] if neuron["syncs"] else ["none"]
    if "compile" in neuron:
        c = neuron["compile"]
        lines += ["", "## torch.compile", "", f"graphs: {c['graphs']}, ops lowered: {c['ops_lowered']}, ops run "
                  f"eagerly: {c['ops_eager']}, graph breaks: {len(c['graph_breaks'])}, recompiles: {len(c['recompiles'])}"]
        lines += ["", *("- " + " / ".join(b) for b in c["graph_breaks"] + c["recompiles"])]
    return "\n".join(lines) + "\n"


def _graph_capture_line(neuron) -> str:
    blockers = neuron.get("graph_capture")
    if blockers is None:
        return "not assessed (the script did not run)"
    if not blockers:
        return ("a step could be captured as a graph and replayed with one launch (torch.neuron.graph, "
                "make_graphed_callables or torch.compile(mode='reduce-overhead'): see docs/graphs.md)")
    return "a step cannot be captured as a graph: " + "; ".join(blockers)


def print_report(report) -> None:
    neuron = report["neuron"]
    print(f"== torchneuron check: {report['script']}")
    for f in neuron["fallbacks"]:
        print(f"  CPU fallback  {f['op']}: {f['calls']} call(s), first at {f['first_call']}")
    for s in neuron["syncs"]:
        print(f"  host sync     {s['kind']} at {s['site']}: {s['count']}")
    if "compile" in neuron:
        c = neuron["compile"]
        print(f"  compile       {c['graphs']} graph(s), {len(c['graph_breaks'])} graph break(s), "
              f"{len(c['recompiles'])} recompile(s)")
        for b in c["graph_breaks"]:
            print("    " + " / ".join(b))
    print(f"  steps         {len(neuron['step_seconds'])}, {step_time(neuron) * 1e3:.2f} ms per step on neuron"
          + (f", {step_time(report['cpu']) * 1e3:.2f} ms on CPU" if report.get("cpu") else ""))
    print(f"  peak memory   {neuron['peak_memory_bytes'] / 2**20:.1f} MiB")
    print(f"  graph capture {_graph_capture_line(neuron)}")
    print(f"  verdict       {report['verdict']}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torchneuron.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    parser.add_argument("--device-map", default="", help="from=to device pairs, e.g. cuda=neuron")
    parser.add_argument("--compile", action="store_true", help="run the script's torch.compile calls on backend "
                        "'neuron' and report graphs, graph breaks and recompilations")
    parser.add_argument("--no-cpu", action="store_true", help="skip the comparison run on CPU")
    parser.add_argument("--output", default="torchneuron-check", help="writes OUTPUT.json and OUTPUT.md")
    parser.add_argument("--cpu-run", action="store_true", help=argparse.SUPPRESS)  # the comparison's child
    args = parser.parse_args(argv)
    mapping = parse_device_map(args.device_map)
    if args.cpu_run:
        result = run_script(args.script, args.args, mapping, "cpu", False)
        print("TORCHNEURON_CHECK " + json.dumps(result))
        return
    report = {"script": args.script, "args": args.args,
              "neuron": run_script(args.script, args.args, mapping, "neuron", args.compile)}
    if not args.no_cpu:
        cpu_map = {k: "cpu" for k in set(mapping) | {"neuron"}}
        command = [sys.executable, "-m", "torchneuron.check", "--cpu-run", "--device-map",
                   ",".join(f"{k}={v}" for k, v in cpu_map.items()), args.script] + list(args.args)
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("TORCHNEURON_CHECK ")), None)
        report["cpu"] = json.loads(line.split(" ", 1)[1]) if line else {
            "error": f"the CPU run failed: {done.stderr[-500:]}", "seconds": 0, "step_seconds": []}
    report["verdict"] = verdict(report)
    print_report(report)
    with open(args.output + ".json", "w") as f:
        json.dump(report, f, indent=2)
    with open(args.output + ".md", "w") as f:
        f.write(markdown(report))
    print(f"  wrote {args.output}.json and {args.output}.md")


if __name__ == "__main__":
    # Run as torchneuron.check, not __main__: the script takes __main__'s place while it runs.
    from torchneuron.check import main as check_main

    check_main()
