"""The MLP with a loss that has no neuron kernel (multi_margin_loss falls back to the CPU)."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 32, device="neuron"), torch.randint(0, 4, (64,), device="neuron")
for step in range(4):
    loss = nn.functional.multi_margin_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
