"""Device-agnostic offloader: the backend module comes from getattr(torch, device)."""
import torch
from torch import nn


class AgnosticOffload(nn.Module):
    def __init__(self, inner: nn.Module, device: str = "cuda"):
        super().__init__()
        self.inner = inner
        self.backend = getattr(torch, device)
        self.copy_stream = self.backend.Stream()
        self.backend.synchronize()

    def forward(self, x):
        self.backend.synchronize()
        return self.inner(x)
