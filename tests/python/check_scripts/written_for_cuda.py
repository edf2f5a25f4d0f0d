"""A training loop written for CUDA: device strings, .cuda() and torch.cuda calls."""
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.cuda.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 16).cuda()
y = torch.randint(0, 2, (32,), device="cuda")
for step in range(3):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
