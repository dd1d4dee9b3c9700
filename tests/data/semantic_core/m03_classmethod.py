import torch
from torch import nn


class StreamPool:
    _streams = {}

    @classmethod
    def get(cls, device):
        if device not in cls._streams:
            cls._streams[device] = torch.cuda.Stream(device)
        return cls._streams[device]


class Prefetch(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.host = w.pin_memory()

    def forward(self, x):
        stream = StreamPool.get(x.device)
        with torch.cuda.stream(stream):
            w = self.host.to(x.device, non_blocking=True)
        return x @ w
