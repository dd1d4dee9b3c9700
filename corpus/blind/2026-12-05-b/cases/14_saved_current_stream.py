"""The compute stream is saved at construction; under capture it is just another side stream."""
import torch
from torch import nn


class SavedStreamOffload(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.compute = torch.cuda.current_stream()
        self.loader = torch.cuda.Stream()

    def forward(self, x):
        with torch.cuda.stream(self.compute):
            y = self.block(x)
        return y


class LiveStreamOffload(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.loader = torch.cuda.Stream()

    def forward(self, x):
        compute = torch.cuda.current_stream()
        with torch.cuda.stream(compute):
            y = self.block(x)
        return y
