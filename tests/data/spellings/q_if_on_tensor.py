import torch
from torch import nn


class Clamped(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.copy = torch.cuda.Stream()

    def forward(self, x, steps: int):
        if steps > 3:
            steps = 3
        if x.abs().max() > 1e4:  # expect: OFL105
            x = x.clamp(-1e4, 1e4)
        return self.block(x)
