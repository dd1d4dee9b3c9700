"""Aliases: torch.cuda imported as tc, torch.Stream / torch.Event, and work on the default stream."""
import torch
import torch.cuda as tc
from torch import nn


class AliasOffloader(nn.Module):
    def __init__(self, host_w):
        super().__init__()
        self.host_w = host_w.pin_memory()
        self.dev_w = torch.empty_like(host_w, device="cuda")
        self.copy_stream = torch.Stream(device="cuda")
        self.ev = torch.Event(device="cuda")

    def forward(self, x):
        with tc.stream(tc.default_stream()):
            self.dev_w.copy_(self.host_w, non_blocking=True)
        self.ev.wait()
        return x @ self.dev_w

    def warm(self):
        self.copy_stream.wait_stream(tc.current_stream())
        with tc.stream(self.copy_stream):
            self.dev_w.copy_(self.host_w, non_blocking=True)
            self.ev.record()
