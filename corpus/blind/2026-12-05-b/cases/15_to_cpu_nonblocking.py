"""Activation offload on the forward path: non_blocking D2H is fine, a plain .cpu() is a host sync."""
import torch
from torch import nn


class ActivationSpill(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.stream = torch.cuda.Stream()
        self.saved = []

    def forward(self, x):
        y = self.block(x)
        self.saved.append(y.to("cpu", non_blocking=True))
        return y


class BlockingSpill(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.stream = torch.cuda.Stream()
        self.saved = []

    def forward(self, x):
        y = self.block(x)
        self.saved.append(y.cpu())
        return y
