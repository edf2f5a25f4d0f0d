"""The MLP logging its loss with .item() every step: a host synchronization per step."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 32, device="neuron"), torch.randint(0, 4, (64,), device="neuron")
losses = []
for step in range(5):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
