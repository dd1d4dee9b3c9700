import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.up = nn.Linear(hidden, hidden)
        self._sizes = {}

    def forward(self, x):
        n = x.shape[0]
        sizes = self._sizes.get(n)
        if sizes is None:
            sizes = torch.tensor([n], device=x.device)
            self._sizes[n] = sizes
        return self.up(x) * sizes


class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.mlp = Mlp(hidden)
        self.counts = torch.tensor([hidden], device="cuda")

    def forward(self, x):
        n = torch.tensor([x.shape[0]], device=x.device)  # expect: OFL106
        return self.mlp(x) * n


def capture(block: Block, x, g):
    with torch.cuda.graph(g):
        block(x)
