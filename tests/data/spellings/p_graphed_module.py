import torch
from torch import nn


class Routed(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.router = nn.Linear(dim, 4)

    def forward(self, x):
        return self.router(x).argmax(-1).tolist()  # expect: OFL105


def build(dim, sample):
    block = Routed(dim).cuda()
    return torch.cuda.make_graphed_callables(block, (sample,))
