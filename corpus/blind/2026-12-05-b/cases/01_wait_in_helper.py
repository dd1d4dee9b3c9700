"""Layer prefetcher whose wait lives in a helper that receives the stored event."""
import torch
from torch import nn


def _block_on(event):
    torch.cuda.current_stream().wait_event(event)


class PrefetchedLinear(nn.Module):
    def __init__(self, weight_cpu: torch.Tensor):
        super().__init__()
        self.copy_stream = torch.cuda.Stream()
        self.host_weight = weight_cpu.pin_memory()
        self.weight = torch.empty_like(self.host_weight, device="cuda")
        self.ready = torch.cuda.Event()

    def prefetch(self):
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            self.weight.copy_(self.host_weight, non_blocking=True)
        self.ready.record(self.copy_stream)

    def forward(self, x):
        _block_on(self.ready)
        return x @ self.weight


class PrimedLinear(nn.Module):
    """Same layer, but every forward issues its own copy and joins it: legal under capture."""

    def __init__(self, weight_cpu: torch.Tensor):
        super().__init__()
        self.copy_stream = torch.cuda.Stream()
        self.host_weight = weight_cpu.pin_memory()
        self.weight = torch.empty_like(self.host_weight, device="cuda")

    def forward(self, x):
        done = torch.cuda.Event()
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            self.weight.copy_(self.host_weight, non_blocking=True)
            done.record()
        _block_on(done)
        return x @ self.weight
