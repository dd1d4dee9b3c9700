"""A block handed to make_graphed_callables whose forward reads data back to the host."""
import torch
from torch import nn


class RoutedBlock(nn.Module):
    def __init__(self, dim, n_experts):
        super().__init__()
        self.router = nn.Linear(dim, n_experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_experts))

    def forward(self, x):
        choice = self.router(x).argmax(-1)
        used = choice.unique().tolist()
        out = torch.zeros_like(x)
        for e in used:
            out = out + self.experts[e](x)
        return out


def build(dim, n_experts, sample):
    block = RoutedBlock(dim, n_experts).cuda()
    return torch.cuda.make_graphed_callables(block, (sample,))
