"""torch.profiler's device track (the Kineto plug-in) and memory snapshots, read back with
PyTorch's own readers: key_averages, the chrome trace JSON, torch.cuda._memory_viz."""
import json
import os
import pickle

import torch
from torch.cuda import _memory_viz
from torch.profiler import ProfilerActivity, profile

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def device_events(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


def test_device_time_is_attributed_to_the_launching_ops():
    x = torch.randn(384, 384, device="neuron")
    torch.neuron.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        (x @ x).relu().sum().item()
    by_name = {e.key: e for e in prof.key_averages()}
    assert by_name["aten::mm"].self_device_time_total > 0
    assert by_name["aten::relu"].self_device_time_total > 0
    assert by_name["aten::matmul"].device_time_total >= by_name["aten::mm"].self_device_time_total
    assert by_name["aten::empty"].self_device_time_total == 0  # allocation launches nothing
    assert "Self NEURON" in prof.key_averages().table()
    # The mm's device time is at most the span between its launch and the end of the profile.
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert {"aten::mm [neuron]", "aten::relu [neuron]"} <= {k.name for k in kernels}


def test_chrome_trace_has_device_tracks_and_flow_arrows(tmp_path):
    x = torch.randn(128, 128, device="neuron")
    with profile(activities=ACTIVITIES) as prof:
        y = torch.nn.functional.gelu(x @ x)
        y.cpu()
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    events = device_events(trace)
    names = {e["name"] for e in events}
    assert "aten::mm [neuron]" in names and "aten::gelu [neuron]" in names
    assert any(e["cat"] == "gpu_memcpy" for e in events)  # the copy to the host
    for e in events:
        assert e["pid"] == 0 and e["dur"] >= 0  # neuron:0's track
        assert e["args"]["launched at"].endswith(f"test_profiler.py:{e['args']['launched at'].rsplit(':')[1]}")
    # Every device event ends a flow that starts on the host thread, inside its op.
    starts = {e["id"]: e for e in trace["traceEvents"] if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {e["id"]: e for e in trace["traceEvents"] if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    assert ends and set(ends) <= set(starts)
    ops = {e["args"]["External id"]: e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"}
    for e in events:
        op = ops[e["args"]["External id"]]
        start = starts[e["args"]["correlation"]]
        assert op["ts"] <= start["ts"] <= op["ts"] + op["dur"] + 1
        assert start["ts"] <= e["ts"] + 1  # launched before it ran
    process_names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
                     if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert "neuron" in process_names.get(0, "")


def test_streams_are_tracks_and_compiled_and_nki_kernels_appear(tmp_path, fresh_compiler):
    from torchneuron import nki
    import torchneuron.nki.language as nl

    @nki.jit
    def double(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(a), 2.0))
        return out

    fused = torch.compile(lambda t: (t * 2 + 1).relu(), backend="neuron")
    x = torch.randn(64, 64, device="neuron")
    fused(x)
    double(x)
    side = torch.neuron.Stream()
    with profile(activities=ACTIVITIES) as prof:
        fused(x)
        double(x)
        with torch.neuron.stream(side):
            x.add(1)
        torch.neuron.synchronize()
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = device_events(json.load(f))
    names = {e["name"] for e in events}
    assert "torchneuron::compiled_kernel [neuron]" in names and "nki:double [neuron]" in names
    assert {e["tid"] for e in events} >= {0, side.stream_id}


def test_tensorboard_handler_and_the_legacy_autograd_profiler(tmp_path):
    x = torch.randn(64, 64, device="neuron")
    with profile(activities=ACTIVITIES,
                 on_trace_ready=torch.profiler.tensorboard_trace_handler(str(tmp_path))):
        (x @ x).sum().item()
    written = [f for f in os.listdir(tmp_path) if f.endswith(".pt.trace.json")]
    assert len(written) == 1
    with open(tmp_path / written[0]) as f:
        assert any(e["name"] == "aten::mm [neuron]" for e in device_events(json.load(f)))
    with torch.autograd.profiler.profile(use_device="neuron") as legacy:
        (x @ x).sum().item()
    mm = [e for e in legacy.key_averages() if e.key == "aten::mm"][0]
    assert mm.self_device_time_total > 0


def test_profile_memory_reports_device_allocations():
    x = torch.randn(256, 256, device="neuron")
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        y = x @ x
        del y
    mm = [e for e in prof.events() if e.name == "aten::mm"][0]
    assert mm.device_memory_usage == 256 * 256 * 4  # the product's memory, allocated inside the op
    freed = [e for e in prof.events() if e.name == "[memory]" and e.device_memory_usage < 0]
    assert freed  # the product's memory came back


def test_profiling_leaves_nothing_behind():
    x = torch.randn(32, 32, device="neuron")
    with profile(activities=ACTIVITIES) as first:
        (x + 1).sum().item()
    with profile(activities=ACTIVITIES) as second:
        (x * 3).sum().item()
    first_names = {e.name for e in first.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1}
    second_names = {e.name for e in second.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1}
    assert "aten::add.out" in first_names or any("add" in n for n in first_names)
    assert not any("add" in n for n in second_names)  # the second trace holds only its own commands


def test_memory_snapshot_matches_the_allocator_and_loads_in_memory_viz(tmp_path):
    torch.neuron.memory._record_memory_history(max_entries=10000)
    try:
        model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to("neuron")
        opt = torch.optim.AdamW(model.parameters())
        data = torch.randn(32, 128, device="neuron")
        loss = model(data).square().mean()
        loss.backward()
        opt.step()
        big = torch.empty(48 << 20, dtype=torch.uint8, device="neuron")  # a segment of its own
        del big
        torch.neuron.synchronize()
        snapshot = torch.neuron.memory._snapshot()
        path = str(tmp_path / "snapshot.pickle")
        torch.neuron.memory._dump_snapshot(path)
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    live = sum(b["size"] for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    assert live == torch.neuron.memory_allocated()
    reserved = sum(s["total_size"] for s in snapshot["segments"] if s["device"] == 0)
    assert reserved == torch.neuron.memory_reserved()
    trace = snapshot["device_traces"][0]
    assert {"alloc", "free_requested", "free_completed", "segment_alloc"} <= {e["action"] for e in trace}
    # The allocations carry the line that launched them.
    here = os.path.basename(__file__)
    assert any(f["filename"].endswith(here) for e in trace if e["action"] == "alloc" for f in e["frames"])
    with open(path, "rb") as f:
        loaded = pickle.load(f)
    assert "total_allocated" in _memory_viz.segsum(loaded)
    assert "alloc" in _memory_viz.trace(loaded) or "cudaMalloc" in _memory_viz.trace(loaded)
    assert "<html>" in _memory_viz.trace_plot(loaded) and "<html>" in _memory_viz.segment_plot(loaded)
    flame = _memory_viz.memory(loaded, format_flamegraph=lambda lines: lines)
    assert here in flame


def test_memory_history_is_off_unless_asked():
    torch.neuron.memory._record_memory_history(enabled=None)
    torch.randn(1000, device="neuron")
    assert torch.neuron.memory._snapshot()["device_traces"] == [[] for _ in range(torch.neuron.device_count())]
