"""torch.save / torch.load of neuron tensors and state_dicts: map_location, weights_only, device index, shared storage."""

import io

import pytest
import torch


def _saved(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def _tensors():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 4, generator=g)
    return {
        "float32": base,
        "int64": torch.arange(-10, 10),
        "bfloat16": torch.randn(5, generator=g).bfloat16(),
        "float16": torch.randn(3, 3, generator=g).half(),
        "bool": torch.tensor([True, False, True]),
        "uint8": torch.arange(0, 256, 7, dtype=torch.uint8),
        "complex64": torch.randn(4, dtype=torch.complex64, generator=g),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "empty": torch.empty(0, 3),
    }


@pytest.mark.parametrize("map_location", ["neuron", "cpu", "neuron:0"])
def test_roundtrip_tensors(map_location):
    cpu = _tensors()
    on_device = {k: v.to("neuron") for k, v in cpu.items()}
    loaded = torch.load(_saved(on_device), map_location=map_location, weights_only=True)
    assert set(loaded) == set(cpu)
    for key, value in loaded.items():
        expected_device = torch.device(map_location if ":" in map_location else
                                       ("neuron:0" if map_location == "neuron" else "cpu"))
        assert value.device == expected_device, key
        assert value.dtype == cpu[key].dtype and value.shape == cpu[key].shape, key
        assert torch.equal(value.cpu(), cpu[key]), key


def test_roundtrip_without_map_location_keeps_device():
    cpu = _tensors()
    on_device = {k: v.to("neuron") for k, v in cpu.items()}
    loaded = torch.load(_saved(on_device), weights_only=True)
    for key, value in loaded.items():
        assert value.device == torch.device("neuron:0"), key
        assert torch.equal(value.cpu(), cpu[key]), key


def test_cpu_checkpoint_loads_onto_neuron():
    cpu = _tensors()
    loaded = torch.load(_saved(cpu), map_location="neuron", weights_only=True)
    for key, value in loaded.items():
        assert value.device.type == "neuron"
        assert torch.equal(value.cpu(), cpu[key]), key


def test_saved_from_neuron1_loads_on_neuron1():
    x = torch.arange(12.0).reshape(3, 4)
    loaded = torch.load(_saved({"x": x.to("neuron:1")}), weights_only=True)
    assert loaded["x"].device == torch.device("neuron:1")
    assert torch.equal(loaded["x"].cpu(), x)
    moved = torch.load(_saved(x.to("neuron:1")), map_location={"neuron:1": "neuron:0"}, weights_only=True)
    assert moved.device == torch.device("neuron:0")
    assert torch.equal(moved.cpu(), x)


def test_views_keep_sharing_storage():
    base = torch.arange(20.0).to("neuron")
    view = base[5:15:2]
    loaded = torch.load(_saved({"base": base, "view": view}), map_location="neuron", weights_only=True)
    assert torch.equal(loaded["view"].cpu(), torch.arange(20.0)[5:15:2])
    assert loaded["view"].untyped_storage().data_ptr() == loaded["base"].untyped_storage().data_ptr()
    loaded["base"].fill_(1.0)
    assert torch.equal(loaded["view"].cpu(), torch.ones(5))


def test_state_dict_roundtrip():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 2))
    reference = {k: v.clone() for k, v in model.state_dict().items()}
    model.to("neuron")
    buffer = _saved(model.state_dict())
    for location in ("neuron", "cpu"):
        buffer.seek(0)
        state = torch.load(buffer, map_location=location, weights_only=True)
        assert list(state) == list(reference)
        for key, value in state.items():
            assert value.device.type == location
            assert torch.equal(value.cpu(), reference[key]), key
    fresh = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 2))
    fresh.to("neuron")
    buffer.seek(0)
    fresh.load_state_dict(torch.load(buffer, map_location="neuron", weights_only=True))
    for key, value in fresh.state_dict().items():
        assert value.device == torch.device("neuron:0")
        assert torch.equal(value.cpu(), reference[key]), key


def test_save_to_file(tmp_path):
    x = torch.randn(100, generator=torch.Generator().manual_seed(1))
    path = tmp_path / "t.pt"
    torch.save(x.to("neuron"), path)
    loaded = torch.load(path, map_location="neuron", weights_only=True)
    assert loaded.device.type == "neuron"
    assert torch.equal(loaded.cpu(), x)
