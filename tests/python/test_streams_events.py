"""Streams and events: creation, current/default stream, ordering of work across streams, sync, query, timing."""

import pytest
import torch

N = 1 << 20


def _reference(seed=0):
    return torch.randn(N, generator=torch.Generator().manual_seed(seed))


def test_neuron_stream_creation():
    s = torch.neuron.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("neuron:0")
    assert s.device_type == torch.Stream(device="neuron:0").device_type
    other = torch.neuron.Stream()
    assert other != s and other.stream_id != s.stream_id
    s1 = torch.neuron.Stream(device=1)
    assert s1.device == torch.device("neuron:1")
    assert torch.neuron.Stream(device="neuron:1").device_index == 1


def test_torch_stream_with_explicit_index():
    s = torch.Stream(device="neuron:1")
    assert s.device == torch.device("neuron:1")
    assert s.stream_id != torch.neuron.default_stream(1).stream_id


def test_torch_stream_without_index_uses_current_device():
    # Like torch.Stream(device='cuda'): no index means the current device.
    s = torch.Stream(device="neuron")
    assert s.device == torch.device("neuron:0")
    with torch.neuron.device(1):
        assert torch.Stream(device="neuron").device == torch.device("neuron:1")


def test_torch_stream_default_device_is_accelerator():
    s = torch.Stream()
    assert s.device.type == "neuron"


def test_current_and_default_stream():
    default = torch.neuron.default_stream()
    assert torch.neuron.current_stream() == default
    assert torch.accelerator.current_stream() == default
    assert torch.neuron.default_stream(1).device == torch.device("neuron:1")
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        assert torch.accelerator.current_stream() == s
        assert torch.neuron.current_stream(1) == torch.neuron.default_stream(1)
    assert torch.neuron.current_stream() == default
    with torch.neuron.stream(None):
        assert torch.neuron.current_stream() == default
    torch.neuron.set_stream(s)
    assert torch.neuron.current_stream() == s
    torch.neuron.set_stream(default)
    assert torch.neuron.current_stream() == default


def test_stream_context_switches_device():
    s1 = torch.neuron.Stream(device=1)
    with torch.neuron.stream(s1):
        assert torch.neuron.current_device() == 1
        assert torch.neuron.current_stream() == s1
        x = torch.ones(4, device="neuron")
        assert x.device == torch.device("neuron:1")
    assert torch.neuron.current_device() == 0
    assert torch.neuron.current_stream(1) == torch.neuron.default_stream(1)
    assert torch.equal(x.cpu(), torch.ones(4))


def test_torch_stream_as_context_manager():
    s = torch.neuron.Stream()
    with s:
        assert torch.accelerator.current_stream() == s
    assert torch.accelerator.current_stream() == torch.neuron.default_stream()


def test_work_on_side_stream_is_ordered_with_default_stream():
    """Work split across streams gives the right values. What this cannot observe: every stream
    of a device shares its one queue, so work runs in submission order whatever the streams, and
    this test would pass if wait_stream did nothing. That a wait orders work is unobservable on
    this device (docs/runtime.md, "Streams and events"); the calls are checked to be accepted."""
    x = _reference(1)
    a = x.to("neuron")  # queued on the default stream
    s = torch.neuron.Stream()
    s.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(s):
        b = a.clone()
        b[::2].fill_(0.25)
        c = torch.empty_like(b)
        c.copy_(b)
    torch.neuron.current_stream().wait_stream(s)
    a.zero_()  # default stream, after the side stream's work
    expected = x.clone()
    expected[::2] = 0.25
    assert torch.equal(c.cpu(), expected)
    assert torch.equal(b.cpu(), expected)
    assert torch.equal(a.cpu(), torch.zeros(N))


def test_stream_synchronize_and_query():
    s = torch.neuron.Stream()
    x = _reference(2)
    with torch.neuron.stream(s):
        y = x.to("neuron")
        y.fill_(3.0)
    s.synchronize()
    assert s.query()
    torch.neuron.synchronize()
    assert torch.neuron.default_stream().query()
    assert torch.equal(y.cpu(), torch.full((N,), 3.0))


def test_event_record_query_synchronize():
    """Events record, complete and can be waited on. As for wait_stream, the ordering a wait_event
    would enforce is already given by the one queue, so this test cannot tell a wait_event that
    does nothing from one that works (docs/runtime.md, "Streams and events")."""
    s = torch.neuron.Stream()
    event = torch.Event(device="neuron")
    x = _reference(3)
    with torch.neuron.stream(s):
        y = x.to("neuron")
        event.record()
    event.synchronize()
    assert event.query()
    after = torch.empty(N, device="neuron")
    torch.neuron.current_stream().wait_event(event)
    after.copy_(y)
    assert torch.equal(after.cpu(), x)
    recorded = s.record_event()
    assert isinstance(recorded, torch.Event)
    recorded.wait(torch.neuron.current_stream())
    recorded.synchronize()
    assert recorded.query()


def test_unrecorded_event_is_complete():
    assert torch.Event(device="neuron").query()
    assert torch.neuron.Event().query()


def test_neuron_event_timing():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    y = torch.ones(N, device="neuron")
    y.fill_(2.0)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float)
    assert elapsed >= 0.0


def test_torch_event_timing():
    start = torch.Event(device="neuron", enable_timing=True)
    end = torch.Event(device="neuron", enable_timing=True)
    start.record()
    y = torch.ones(4 * N, device="neuron")
    y.fill_(2.0)
    end.record()
    end.synchronize()
    elapsed = start.elapsed_time(end)
    assert elapsed >= 0.0
    assert elapsed < 60_000.0
    assert torch.equal(y[:8].cpu(), torch.full((8,), 2.0))


def test_neuron_event_elapsed_time_without_timing_raises():
    start = torch.neuron.Event()
    end = torch.neuron.Event()
    start.record()
    end.record()
    end.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        start.elapsed_time(end)


def test_torch_event_elapsed_time_without_timing_raises():
    start = torch.Event(device="neuron")
    end = torch.Event(device="neuron")
    start.record()
    end.record()
    end.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        start.elapsed_time(end)


def test_interprocess_event_rejected():
    with pytest.raises(ValueError, match="interprocess"):
        torch.neuron.Event(interprocess=True)


def test_accelerator_synchronize():
    x = _reference(4)
    y = x.to("neuron")
    z = torch.empty(N, device="neuron:1")
    z.copy_(y)
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(1)
    assert torch.neuron.default_stream(0).query()
    assert torch.neuron.default_stream(1).query()
    assert torch.equal(z.cpu(), x)


def test_streams_on_two_devices():
    x = _reference(5)
    s0 = torch.neuron.Stream(device=0)
    s1 = torch.neuron.Stream(device=1)
    with torch.neuron.stream(s0):
        a = x.to("neuron:0")
    with torch.neuron.stream(s1):
        b = torch.empty(N, device="neuron:1")
        b.copy_(a)
        b[:10].fill_(-1.0)
    s1.synchronize()
    expected = x.clone()
    expected[:10] = -1.0
    assert torch.equal(b.cpu(), expected)


def test_stream_context_class_and_capture_query():
    """torch.neuron.stream returns a StreamContext, as torch.cuda.stream does; entering it makes
    the stream current on its device and leaving restores stream and device; None changes
    nothing. No stream is ever capturing."""
    side = torch.neuron.Stream(device=1)
    context = torch.neuron.stream(side)
    assert isinstance(context, torch.neuron.StreamContext)
    with context as entered:
        assert entered == side
        assert torch.neuron.current_device() == 1
        assert torch.neuron.current_stream(1) == side
        assert not torch.neuron.is_current_stream_capturing()
    assert torch.neuron.current_device() == 0
    assert torch.neuron.current_stream(1) == torch.neuron.default_stream(1)
    with torch.neuron.StreamContext(None) as entered:
        assert entered is None and torch.neuron.current_device() == 0


def test_can_device_access_peer():
    assert torch.neuron.can_device_access_peer(0, 1)
    assert torch.neuron.can_device_access_peer("neuron:1", torch.device("neuron", 0))
    assert not torch.neuron.can_device_access_peer(0, 0)  # as CUDA answers for a device and itself
    with pytest.raises(ValueError, match="out of range"):
        torch.neuron.can_device_access_peer(0, torch.neuron.device_count())
