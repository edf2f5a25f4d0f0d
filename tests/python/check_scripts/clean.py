"""A small MLP trained for 6 steps on neuron with nothing that stops it running natively."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4)).to("neuron")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 32, device="neuron"), torch.randint(0, 4, (64,), device="neuron")
for step in range(6):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("final loss", loss.item())
