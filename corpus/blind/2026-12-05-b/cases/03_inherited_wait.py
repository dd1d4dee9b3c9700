"""The wait on a stored event is inherited from a base class."""
import torch
from torch import nn


class _StreamedBase(nn.Module):
    def __init__(self):
        super().__init__()
        self.h2d = torch.cuda.Stream()
        self.loaded = torch.cuda.Event()

    def _sync_weights(self):
        self.loaded.wait(torch.cuda.current_stream())

    def start_load(self, host, dev):
        self.h2d.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.h2d):
            dev.copy_(host, non_blocking=True)
            self.loaded.record()


class StreamedMLP(_StreamedBase):
    def __init__(self, w):
        super().__init__()
        self.w = w

    def forward(self, x):
        self._sync_weights()
        return torch.relu(x @ self.w)
