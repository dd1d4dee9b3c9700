"""Whether the host copy is pinned is decided at run time."""
import torch
from torch import nn


class StagedWeights(nn.Module):
    def __init__(self, shape, pin: bool):
        super().__init__()
        self.stream = torch.cuda.Stream()
        self.host = torch.empty(shape, pin_memory=pin)
        self.dev = torch.empty(shape, device="cuda")

    def forward(self, x):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.dev.copy_(self.host, non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.stream)
        return x @ self.dev


class AlwaysPinned(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.stream = torch.cuda.Stream()
        self.host = torch.empty(shape, pin_memory=True)
        self.dev = torch.empty(shape, device="cuda")

    def forward(self, x):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.dev.copy_(self.host, non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.stream)
        return x @ self.dev
