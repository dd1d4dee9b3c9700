"""A plain model file with no stream, event or graph code: .item() here is not a finding by default."""
import torch
from torch import nn


class TinyMoE(nn.Module):
    def __init__(self, dim, n):
        super().__init__()
        self.gate = nn.Linear(dim, n)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))

    def forward(self, x):
        top = int(self.gate(x).mean(0).argmax().item())
        return self.experts[top](x)
