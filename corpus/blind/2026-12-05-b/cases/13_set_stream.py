"""Side-stream work switched in with torch.cuda.set_stream instead of a context manager."""
import torch
from torch import nn


class SetStreamPrefetch(nn.Module):
    def __init__(self, block, host_w):
        super().__init__()
        self.block = block
        self.copy = torch.cuda.Stream()
        self.host_w = host_w.pin_memory()
        self.dev_w = torch.empty_like(self.host_w, device="cuda")

    def forward(self, x):
        main = torch.cuda.current_stream()
        self.copy.wait_stream(main)
        torch.cuda.set_stream(self.copy)
        self.dev_w.copy_(self.host_w, non_blocking=True)
        torch.cuda.set_stream(main)
        main.wait_stream(self.copy)
        return self.block(x, self.dev_w)


class UnforkedSetStream(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.copy = torch.cuda.Stream()

    def forward(self, x):
        main = torch.cuda.current_stream()
        torch.cuda.set_stream(self.copy)
        scratch = torch.empty_like(x)
        torch.cuda.set_stream(main)
        return self.block(x, scratch)
