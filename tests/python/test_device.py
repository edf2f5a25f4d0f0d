"""Device registration: autoload, torch.accelerator, torch.neuron device API, generated methods, Dynamo interface."""

import os

import pytest
import torch

EXPECTED_DEVICES = int(os.environ.get("TORCHNEURON_NUM_DEVICES", "2"))


def test_autoload_in_fresh_process(run_python):
    result = run_python("import torch; print(torch.ones(2, device='neuron') + 1)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "tensor([2., 2.], device='neuron:0')"


def test_import_torch_does_not_import_dynamo(run_python):
    # Registering the Dynamo interface lazily is what keeps `import torch` cheap.
    code = "import sys, torch; torch.ones(1, device='neuron'); print('torch._dynamo' in sys.modules)"
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_current_accelerator_is_neuron():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.device("neuron:1").type == "neuron"


def test_device_count_matches_env():
    assert torch.accelerator.device_count() == EXPECTED_DEVICES
    assert torch.neuron.device_count() == EXPECTED_DEVICES


def test_device_count_defaults_to_two(run_python):
    code = "import torch; print(torch.accelerator.device_count(), torch.neuron.device_count())"
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "2"]


def test_device_count_from_env(run_python):
    code = (
        "import torch\n"
        "print(torch.accelerator.device_count(), torch.neuron.device_count())\n"
        "x = torch.arange(4.).to('neuron:2')\n"
        "print(x.device, x.cpu().tolist())\n"
    )
    result = run_python(code, env={"TORCHNEURON_NUM_DEVICES": "3"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["3", "3"]
    assert lines[1] == "neuron:2 [0.0, 1.0, 2.0, 3.0]"


def test_accelerator_device_index():
    assert torch.accelerator.current_device_index() == 0
    try:
        torch.accelerator.set_device_index(1)
        assert torch.accelerator.current_device_index() == 1
        assert torch.neuron.current_device() == 1
        x = torch.empty(3, device="neuron")
        assert x.device == torch.device("neuron:1")
        x.fill_(2.5)
        assert torch.equal(x.cpu(), torch.full((3,), 2.5))
    finally:
        torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0
    assert torch.empty(1, device="neuron").device == torch.device("neuron:0")


def test_neuron_module_basics():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == EXPECTED_DEVICES
    assert torch.neuron.current_device() == 0
    assert torch.neuron.is_bf16_supported()
    amp = torch.neuron.get_amp_supported_dtype()
    assert torch.bfloat16 in amp and torch.float16 in amp
    name = torch.neuron.get_device_name()
    assert isinstance(name, str) and "Neuron" in name
    assert torch.neuron.get_device_name(1) == name
    props = torch.neuron.get_device_properties(0)
    assert props.name == name
    assert props.total_memory == torch.neuron.mem_get_info(0)[1]
    assert props.total_memory == int(os.environ.get("TORCHNEURON_HBM_GB", "8")) << 30
    assert props.multi_processor_count >= 1
    with pytest.raises(ValueError, match="out of range"):
        torch.neuron.get_device_properties(EXPECTED_DEVICES)


def test_set_device_forms():
    try:
        for form in (1, "neuron:1", torch.device("neuron", 1)):
            torch.neuron.set_device(0)
            torch.neuron.set_device(form)
            assert torch.neuron.current_device() == 1
            assert torch.ones(1, device="neuron").device.index == 1
    finally:
        torch.neuron.set_device(0)
    with pytest.raises(ValueError):
        torch.neuron.set_device("cpu")


def test_device_context_manager_restores():
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        assert torch.zeros(2, device="neuron").device == torch.device("neuron:1")
        with torch.neuron.device("neuron:0"):
            assert torch.neuron.current_device() == 0
        assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(None):  # None: no change, like torch.cuda.device
        assert torch.neuron.current_device() == 0
    with pytest.raises(KeyError):
        with torch.neuron.device(1):
            raise KeyError("leave the block by an exception")
    assert torch.neuron.current_device() == 0


def test_device_of():
    x = torch.ones(1, device="neuron:1")
    with torch.neuron.device_of(x):
        assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 0


def test_generated_tensor_methods():
    cpu = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert not cpu.is_neuron
    dev = cpu.neuron()
    assert dev.is_neuron
    assert dev.device == torch.device("neuron:0")
    assert torch.equal(dev.cpu(), cpu)
    dev1 = cpu.neuron(1)
    assert dev1.device == torch.device("neuron:1")
    assert torch.equal(dev1.cpu(), cpu)
    storage = cpu.untyped_storage().neuron()
    assert storage.device.type == "neuron"


def test_generated_module_method():
    torch.manual_seed(0)
    module = torch.nn.Linear(4, 3)
    reference = {k: v.clone() for k, v in module.state_dict().items()}
    returned = module.neuron()
    assert returned is module
    for key, value in module.state_dict().items():
        assert value.device == torch.device("neuron:0")
        assert torch.equal(value.cpu(), reference[key])
    module.neuron(1)
    assert module.weight.device == torch.device("neuron:1")
    assert torch.equal(module.weight.cpu(), reference["weight"])


def test_device_index_out_of_range():
    with pytest.raises((ValueError, RuntimeError)) as info:
        torch.ones(1, device="neuron:7")
    message = str(info.value)
    assert "7" in message
    assert f"0..{EXPECTED_DEVICES - 1}" in message
    # The device still works after the error.
    assert torch.equal(torch.ones(3, device="neuron").cpu(), torch.ones(3))
    assert torch.equal((torch.arange(3).to("neuron:1")).cpu(), torch.arange(3))


def test_set_device_out_of_range_keeps_current():
    with pytest.raises((ValueError, RuntimeError), match="out of range"):
        torch.neuron.set_device(EXPECTED_DEVICES)
    assert torch.neuron.current_device() == 0
    with pytest.raises((ValueError, RuntimeError), match="out of range"):
        torch.accelerator.set_device_index(EXPECTED_DEVICES + 3)
    assert torch.accelerator.current_device_index() == 0


def test_set_device_negative_is_a_no_op():
    # As torch.cuda.set_device(-1); Dynamo's exchange_device(-1) relies on it.
    torch.neuron.set_device(1)
    try:
        torch.neuron.set_device(-1)
        assert torch.neuron.current_device() == 1
        from torch._dynamo.device_interface import get_interface_for_device

        assert get_interface_for_device("neuron").exchange_device(-1) == 1
        assert torch.neuron.current_device() == 1
    finally:
        torch.neuron.set_device(0)


def test_dynamo_device_interface():
    import torch._dynamo  # noqa: F401  (registration happens when Dynamo loads)
    from torch._dynamo.device_interface import DeviceInterface, get_interface_for_device

    interface = get_interface_for_device("neuron")
    assert issubclass(interface, DeviceInterface)
    assert interface.__module__.startswith("torchneuron")
    assert interface.is_available()
    assert interface.device_count() == EXPECTED_DEVICES
    assert interface.current_device() == 0
    assert interface.Worker.current_device() == 0
    assert interface.get_device_properties(0).total_memory == torch.neuron.mem_get_info()[1]
    assert interface.get_compute_capability() == 20
    assert interface.is_bf16_supported()
    assert interface.get_raw_stream(0) == torch.neuron.current_stream(0).stream_id
    try:
        assert interface.exchange_device(1) == 0
        assert torch.neuron.current_device() == 1
        assert interface.maybe_exchange_device(0) == 1
        assert torch.neuron.current_device() == 0
        interface.set_device(1)
        assert interface.current_device() == 1
    finally:
        torch.neuron.set_device(0)
    with interface.device(1):
        assert interface.current_device() == 1
    assert interface.current_device() == 0
    x = torch.arange(5.0).to("neuron")
    before = interface.memory_allocated(0)
    y = torch.empty(1024, device="neuron")
    assert interface.memory_allocated(0) == before + 4096
    del y
    stream = interface.Stream()
    with interface.stream(stream):
        assert interface.current_stream() == stream
        z = x.clone()
    interface.synchronize()
    assert torch.equal(z.cpu(), torch.arange(5.0))
    event = interface.Event()
    event.record()
    event.synchronize()
    assert event.query()


@pytest.mark.parametrize(
    "variable, value",
    [("TORCHNEURON_NUM_DEVICES", "two"), ("TORCHNEURON_NUM_DEVICES", "65"), ("TORCHNEURON_HBM_GB", "0")],
)
def test_malformed_device_settings_fail_at_import(run_python, variable, value):
    result = run_python("import torch", env={variable: value})
    assert result.returncode != 0
    assert f"{variable}={value!r} must be a whole number" in result.stderr


def test_zero_devices_gives_a_clear_error(run_python):
    code = (
        "import torch\n"
        "assert not torch.neuron.is_available() and torch.neuron.device_count() == 0\n"
        "try:\n"
        "    torch.ones(1, device='neuron')\n"
        "except ValueError as e:\n"
        "    print('ERR', e)\n"
    )
    result = run_python(code, env={"TORCHNEURON_NUM_DEVICES": "0"})
    assert result.returncode == 0, result.stderr
    assert "no neuron devices are configured (TORCHNEURON_NUM_DEVICES=0)" in result.stdout


def test_importing_torchneuron_before_torch_works(run_python):
    # `python -m torchneuron.<tool>` imports the package first; torch's autoload re-enters it.
    result = run_python("import torchneuron, torch; print(torch.ones(2, device='neuron').cpu())")
    assert result.returncode == 0, result.stderr
    assert "tensor([1., 1.])" in result.stdout


def test_set_device_starts_the_device_as_cuda_does(run_python):
    """torch.cuda.set_device initializes CUDA; code that resolves an index-less device (FakeTensor,
    DTensor's seeded initialisation) then takes the current device."""
    code = ("import torch, torchneuron\n"
            "from torch._subclasses.fake_tensor import FakeTensorMode\n"
            "before = torch.neuron.is_initialized()\n"
            "torch.neuron.set_device(1)\n"
            "with FakeTensorMode():\n"
            "    fake = torch.empty(2, device='neuron')\n"
            "print(before, torch.neuron.is_initialized(), fake.device)\n")
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True", "neuron:1"]


def test_compute_engines_follow_torch_num_threads():
    from torchneuron import _C

    before = torch.get_num_threads()
    a = torch.randn(512, 512, dtype=torch.float64)  # float64: the split cannot move the result past 1e-7
    try:
        for threads in (1, 3, 2):
            torch.set_num_threads(threads)
            product = (a.to("neuron") @ a.to("neuron")).cpu()
            assert _C._compute_threads() == threads
            torch.testing.assert_close(product, a @ a)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("setting", ["affinity", "omp"])
def test_compute_engines_start_at_the_process_cpu_limit(run_python, setting):
    # One core through the CPU affinity (as `taskset -c N`), or OMP_NUM_THREADS=1 (as torchrun
    # sets for each rank): the engines start at 1, as torch's own intra-op pool does.
    code = (
        "import os\n"
        + ("os.environ.pop('OMP_NUM_THREADS', None)\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
           if setting == "affinity" else "")
        + "import torch\nfrom torchneuron import _C\n"
        "assert (torch.ones(3, device='neuron') + 1).sum().item() == 6\n"
        "print(torch.get_num_threads(), _C._compute_threads())\n"
    )
    result = run_python(code, env={"OMP_NUM_THREADS": "1"} if setting == "omp" else None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "1"]
