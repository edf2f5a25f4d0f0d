"""TorchAO float8 training under FSDP2 on neuron against the same run on CPU through Gloo: a tiny
Llama's decoder linears in float8 (tensor-wise scales) with float8 all-gather of the sharded
weights and the scales precomputed for the next step, as TorchTitan's float8 option runs it."""

import torch
import torch.distributed as dist
import transformers
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torchao.float8 import Float8LinearConfig, convert_to_float8_training, precompute_float8_dynamic_scale_for_fsdp
from torchao.float8.fsdp_utils import WeightWithDynamicFloat8CastTensor

import torchneuron
from common import check, report, setup

rank, world, device = setup("cpu:gloo,neuron:neuron")
torchneuron.set_fallback_mode("error")
meshes = {"neuron": init_device_mesh("neuron", (world,)), "cpu": init_device_mesh("cpu", (world,))}
g = torch.Generator().manual_seed(30 + rank)
batches = [torch.randint(0, 128, (2, 16), generator=g) for _ in range(3)]


def sharded_llama(device_type):
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                      max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    convert_to_float8_training(model.model, config=Float8LinearConfig(enable_fsdp_float8_all_gather=True))
    for layer in model.model.layers:
        fully_shard(layer, mesh=meshes[device_type])
    fully_shard(model, mesh=meshes[device_type])
    return model.to(device_type)


def train(model, device_type):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for tokens in batches:
        tokens = tokens.to(device_type)
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        precompute_float8_dynamic_scale_for_fsdp(model)
        losses.append(loss.item())
    return torch.tensor(losses)


neuron_model, cpu_model = sharded_llama("neuron"), sharded_llama("cpu")


def weights_gather_in_float8():
    local = neuron_model.model.layers[0].mlp.up_proj.weight.to_local()
    assert isinstance(local, WeightWithDynamicFloat8CastTensor), type(local)


check("the sharded weights all-gather in float8", weights_gather_in_float8)
neuron_losses, cpu_losses = train(neuron_model, "neuron"), train(cpu_model, "cpu")


def same_training():
    torch.testing.assert_close(neuron_losses, cpu_losses, rtol=1e-4, atol=1e-4)
    for got, expected in zip(neuron_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(got.full_tensor().cpu(), expected.full_tensor(), rtol=1e-3, atol=1e-4)
    assert neuron_losses[-1] < neuron_losses[0], f"did not train: {neuron_losses}"


check("FSDP2 float8 all-gather, 3 SGD steps: losses and weights", same_training)


def no_fallback():
    assert torchneuron.fallback_report() == {}, torchneuron.fallback_report()


check("no op fell back to the CPU", no_fallback)
report()
dist.destroy_process_group()
