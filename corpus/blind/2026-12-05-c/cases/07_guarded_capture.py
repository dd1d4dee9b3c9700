"""Offloader that checks the capture state through a helper and a flag before host-side work."""
import torch
from torch import nn


def capturing():
    return torch.cuda.is_current_stream_capturing()


class GuardedOffloader(nn.Module):
    def __init__(self, w_host: torch.Tensor):
        super().__init__()
        self.w_host = w_host.pin_memory()
        self.w_dev = torch.empty_like(w_host, device="cuda")
        self.stream = torch.cuda.Stream()
        self.loaded = torch.cuda.Event()
        self.w_dev.copy_(self.w_host)
        torch.cuda.synchronize()

    def _check(self, x):
        if capturing():
            return
        if torch.isnan(x).any():
            print("nan detected", x.sum().item())

    def forward(self, x):
        self._check(x)
        eager = not capturing()
        if eager:
            self.stream.synchronize()
            self.loaded.wait()
        return x @ self.w_dev
