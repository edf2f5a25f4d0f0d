"""Device errors: deferred faults raised at sync points, launch blocking, mixed-device checks, fork safety."""

import json
import sys
import textwrap

import pytest
import torch

import torchneuron

FAULT_OP = "torchneuron.testing.inject_fault"
THIS_FILE = __file__


def inject(message, device=0):
    """Injects a fault on the device and returns 'file:line' of the _inject_fault call below."""
    line = sys._getframe().f_lineno + 1
    torchneuron._C._inject_fault(device, message)
    return f"{THIS_FILE}:{line}"


def assert_fault_message(error, message, site):
    text = str(error)
    assert FAULT_OP in text, text
    assert message in text, text
    assert site in text, text


def test_fault_is_raised_at_next_synchronize():
    torchneuron._C._inject_fault(0, "boom"); line = sys._getframe().f_lineno  # noqa: E702
    with pytest.raises(torch.AcceleratorError) as info:
        torch.neuron.synchronize()
    assert isinstance(info.value, RuntimeError)
    assert_fault_message(info.value, "boom", f"{THIS_FILE}:{line}")
    assert "neuron:0" in str(info.value)
    # Raised once: the device has recovered.
    torch.neuron.synchronize()


def test_fault_names_the_launching_line():
    site = inject("from a helper")
    with pytest.raises(torch.AcceleratorError) as info:
        torch.accelerator.synchronize()
    assert_fault_message(info.value, "from a helper", site)


@pytest.mark.parametrize("sync_point", ["cpu", "item", "event_synchronize", "stream_synchronize",
                                        "accelerator_synchronize", "copy_to_host"])
def test_fault_raised_at_each_sync_point(sync_point):
    x = torch.arange(4.0).to("neuron")
    event = torch.Event(device="neuron")
    torch.neuron.synchronize()
    site = inject("boom")
    with pytest.raises(torch.AcceleratorError) as info:
        if sync_point == "cpu":
            x.cpu()
        elif sync_point == "item":
            x[1].item()
        elif sync_point == "event_synchronize":
            event.record()
            event.synchronize()
        elif sync_point == "stream_synchronize":
            torch.neuron.current_stream().synchronize()
        elif sync_point == "accelerator_synchronize":
            torch.accelerator.synchronize()
        else:
            torch.empty(4).copy_(x)
    assert_fault_message(info.value, "boom", site)
    torch.neuron.synchronize()
    assert torch.equal(x.cpu(), torch.arange(4.0))


def test_fault_is_not_raised_at_the_call():
    torchneuron._C._inject_fault(0, "later")  # must return normally
    y = torch.zeros(3, device="neuron")  # and so must more asynchronous work
    y.fill_(1.0)
    with pytest.raises(torch.AcceleratorError, match="later"):
        torch.neuron.synchronize()


def test_earliest_fault_wins():
    first = inject("first fault")
    inject("second fault")
    with pytest.raises(torch.AcceleratorError) as info:
        torch.neuron.synchronize()
    assert_fault_message(info.value, "first fault", first)
    assert "second fault" not in str(info.value)
    # The second fault was queued after the first and skipped with the rest.
    torch.neuron.synchronize()


def test_work_after_fault_is_skipped_and_device_recovers():
    before = torch.arange(100.0)
    intact = before.to("neuron")
    target = torch.zeros(100, device="neuron")
    torch.neuron.synchronize()
    inject("boom")
    target.copy_(torch.ones(100))  # enqueued after the fault: skipped
    target[::2].fill_(5.0)  # skipped too
    with pytest.raises(torch.AcceleratorError, match="boom"):
        torch.neuron.synchronize()
    assert torch.equal(target.cpu(), torch.zeros(100))
    # Data synchronized before the fault is intact.
    assert torch.equal(intact.cpu(), before)
    # The device works again: a fresh copy gives correct data.
    fresh = torch.linspace(-1, 1, 50)
    assert torch.equal(fresh.to("neuron").cpu(), fresh)
    target.copy_(torch.ones(100))
    assert torch.equal(target.cpu(), torch.ones(100))


def test_fault_on_one_device_does_not_affect_the_other():
    x1 = torch.arange(6.0).to("neuron:1")
    site = inject("only on zero", device=0)
    assert torch.equal(x1.cpu(), torch.arange(6.0))
    torch.neuron.synchronize(1)
    with pytest.raises(torch.AcceleratorError) as info:
        torch.neuron.synchronize(0)
    assert_fault_message(info.value, "only on zero", site)
    assert "neuron:0" in str(info.value)


def test_fault_on_second_device():
    site = inject("device one", device=1)
    with pytest.raises(torch.AcceleratorError) as info:
        torch.neuron.synchronize(1)
    assert_fault_message(info.value, "device one", site)
    assert "neuron:1" in str(info.value)


def test_set_launch_blocking_raises_at_the_call():
    torchneuron._C._set_launch_blocking(True)
    try:
        assert torchneuron._C._launch_blocking()
        line = sys._getframe().f_lineno + 2
        with pytest.raises(torch.AcceleratorError) as info:
            torchneuron._C._inject_fault(0, "blocking boom")
        assert_fault_message(info.value, "blocking boom", f"{THIS_FILE}:{line}")
        x = torch.arange(3.0).to("neuron")
        assert torch.equal(x.cpu(), torch.arange(3.0))
    finally:
        torchneuron._C._set_launch_blocking(False)
    torch.neuron.synchronize()


LAUNCH_BLOCKING_SCRIPT = textwrap.dedent(
    """
    import torch, torchneuron
    x = torch.ones(2, device='neuron')
    try:
        torchneuron._C._inject_fault(0, 'boom')
    except torch.AcceleratorError as error:
        print('RAISED_AT_CALL')
        print(error)
    else:
        print('NOT_RAISED_AT_CALL')
    torch.neuron.synchronize()
    print('SYNC_OK', (x + 1).cpu().tolist())
    """
)


@pytest.mark.parametrize("variable", ["NEURON_LAUNCH_BLOCKING", "TORCHNEURON_LAUNCH_BLOCKING"])
def test_launch_blocking_env(run_python, variable):
    result = run_python(LAUNCH_BLOCKING_SCRIPT, env={variable: "1"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "RAISED_AT_CALL" in out, out
    assert FAULT_OP in out and "boom" in out
    assert "<string>:5" in out, out  # the line of the _inject_fault call in the script
    assert "SYNC_OK [2.0, 2.0]" in out


def test_without_launch_blocking_env_the_call_returns(run_python):
    script = LAUNCH_BLOCKING_SCRIPT.replace(
        "torch.neuron.synchronize()\n",
        "try:\n    torch.neuron.synchronize()\nexcept torch.AcceleratorError:\n    print('RAISED_AT_SYNC')\n",
    )
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    assert "NOT_RAISED_AT_CALL" in result.stdout
    assert "RAISED_AT_SYNC" in result.stdout
    assert "SYNC_OK [2.0, 2.0]" in result.stdout


# ---- device checks on the host (synchronous) ------------------------------------------------


def test_mixed_neuron_devices_raise():
    a = torch.ones(3, device="neuron:0")
    b = torch.ones(3, device="neuron:1")
    with pytest.raises(RuntimeError) as info:
        torch.add(a, b)
    message = str(info.value)
    assert "neuron:0" in message and "neuron:1" in message
    assert not isinstance(info.value, torch.AcceleratorError)
    torch.neuron.synchronize()


def test_neuron_with_cpu_tensor_raises_like_cuda():
    a = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device") as info:
        torch.add(a, torch.ones(3))
    assert "cpu" in str(info.value) and "neuron:0" in str(info.value)


def test_neuron_with_zero_dim_cpu_tensor_is_accepted():
    x = torch.arange(4.0)
    result = torch.add(x.to("neuron"), torch.tensor(2.5))
    assert result.device == torch.device("neuron:0")
    assert torch.equal(result.cpu(), torch.add(x, torch.tensor(2.5)))


def test_unsupported_dtype_is_rejected_on_the_host():
    """A sub-byte dtype is refused before anything reaches the queue, which stays usable
    (float8 and the wide unsigned types copy as bits: test_copy)."""
    with pytest.raises(RuntimeError, match="UInt4 is not supported on neuron"):
        torch.zeros(2, dtype=torch.uint4).to("neuron")
    torch.neuron.synchronize()
    assert torch.equal(torch.ones(2, device="neuron").cpu(), torch.ones(2))


# ---- fork -----------------------------------------------------------------------------------

FORK_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import torch
    x = torch.ones(2, device='neuron')
    torch.neuron.synchronize()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        report = {'bad_fork': torch.neuron._is_in_bad_fork()}
        try:
            torch.ones(1, device='neuron')
            report['error'] = None
        except Exception as error:
            report['error'] = type(error).__name__ + ': ' + str(error)
        try:
            torch.neuron._lazy_init()
            report['lazy_init'] = None
        except Exception as error:
            report['lazy_init'] = str(error)
        os.write(write, json.dumps(report).encode())
        os._exit(0)
    os.close(write)
    data = b''
    while chunk := os.read(read, 65536):
        data += chunk
    os.waitpid(pid, 0)
    report = json.loads(data)
    report['parent_bad_fork'] = torch.neuron._is_in_bad_fork()
    report['parent_ok'] = (x + 1).cpu().tolist()
    print(json.dumps(report))
    """
)


def test_fork_after_init_is_refused_in_child(run_python):
    result = run_python(FORK_SCRIPT, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["bad_fork"] is True
    assert report["error"] is not None, "the child used the parent's device without an error"
    assert "spawn" in report["error"]
    assert "fork" in report["error"]
    assert report["lazy_init"] is not None and "spawn" in report["lazy_init"]
    assert report["parent_bad_fork"] is False
    assert report["parent_ok"] == [2.0, 2.0]


def test_fork_before_init_is_fine(run_python):
    code = textwrap.dedent(
        """
        import os, torch
        pid = os.fork()
        if pid == 0:
            ok = torch.neuron._is_in_bad_fork() is False and torch.ones(2, device='neuron').cpu().sum().item() == 2
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print('CHILD', os.waitstatus_to_exitcode(status))
        """
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "CHILD 0" in result.stdout


@pytest.mark.parametrize("name", ["mm", "addmm", "bmm", "linear", "layer_norm", "nll_loss", "conv2d", "index_select",
                                  "embedding", "softmax_backward", "masked_select", "other_device"])
def test_native_ops_refuse_tensors_on_another_device(name):
    # Native kernels read device memory only: a CPU (or other-device) argument must be refused
    # on the host, as CUDA refuses it, never read silently.
    import torch.nn.functional as F
    a = torch.randn(3, 3, device="neuron")
    c = torch.randn(3, 3)
    calls = {
        "mm": lambda: torch.mm(a, c),
        "addmm": lambda: torch.addmm(c[0], a, a),
        "bmm": lambda: torch.bmm(a[None], c[None]),
        "linear": lambda: F.linear(a, c),
        "layer_norm": lambda: F.layer_norm(a, (3,), c[0], None),
        "nll_loss": lambda: F.nll_loss(a, torch.tensor([0, 1, 2])),
        "conv2d": lambda: F.conv2d(a[None, None], c[None, None]),
        "index_select": lambda: a.index_select(0, torch.tensor([0])),
        "embedding": lambda: F.embedding(torch.tensor([0]), a),
        "softmax_backward": lambda: torch.ops.aten._softmax_backward_data(a, c, 1, torch.float32),
        "masked_select": lambda: torch.masked_select(a, c > 0),
        "other_device": lambda: torch.mm(a, a.to("neuron:1")),
    }
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        calls[name]()
    assert torch.equal((a + torch.tensor(1.0)).cpu(), a.cpu() + 1)  # 0-dim CPU scalars stay fine


def loss_fault_site(module, log_probs, target):
    """Runs an nn.NLLLoss whose target check faults on the device; returns the error and the call's line."""
    line = sys._getframe().f_lineno + 1
    module(log_probs, target)
    with pytest.raises(torch.AcceleratorError) as info:
        torch.neuron.synchronize()
    return str(info.value), f"{THIS_FILE}:{line}"


def test_fault_from_a_native_op_names_the_user_line_outside_torch():
    # torch releases the GIL around native ops, so this covers the site capture that reads the
    # stack without it; nn.Module and F.nll_loss frames are skipped to reach this file.
    module = torch.nn.NLLLoss()
    log_probs = torch.randn(2, 4, device="neuron").log_softmax(1)
    bad = torch.tensor([0, 9], device="neuron")
    for _ in range(3):  # the same line again: from the per-thread cache
        text, site = loss_fault_site(module, log_probs, bad)
        assert site in text, text
    line = sys._getframe().f_lineno + 1
    module(log_probs, bad)
    with pytest.raises(torch.AcceleratorError, match="Target 9 is out of bounds") as info:
        torch.neuron.synchronize()
    assert f"{THIS_FILE}:{line}" in str(info.value)


def test_fault_site_is_captured_on_another_python_thread():
    import threading

    module = torch.nn.NLLLoss()
    log_probs = torch.randn(1, 4, device="neuron").log_softmax(1)
    bad = torch.tensor([5], device="neuron")
    results = []
    thread = threading.Thread(target=lambda: results.append(loss_fault_site(module, log_probs, bad)))
    thread.start()
    thread.join()
    text, site = results[0]
    assert site in text, text
