"""record_stream evaluated inside the side-stream context (a no-op) vs. after it."""
import torch
from torch import nn


class Uploader(nn.Module):
    def __init__(self, host_chunks):
        super().__init__()
        self.side = torch.cuda.Stream()
        self.host_chunks = [c.pin_memory() for c in host_chunks]

    def forward(self, x, i):
        compute = torch.cuda.current_stream()
        self.side.wait_stream(compute)
        with torch.cuda.stream(self.side):
            w = self.host_chunks[i].to("cuda", non_blocking=True)
            w.record_stream(torch.cuda.current_stream())
        compute.wait_stream(self.side)
        return x @ w


class UploaderFixed(nn.Module):
    def __init__(self, host_chunks):
        super().__init__()
        self.side = torch.cuda.Stream()
        self.host_chunks = [c.pin_memory() for c in host_chunks]

    def forward(self, x, i):
        compute = torch.cuda.current_stream()
        self.side.wait_stream(compute)
        with torch.cuda.stream(self.side):
            w = self.host_chunks[i].to("cuda", non_blocking=True)
            w.record_stream(compute)
        compute.wait_stream(self.side)
        w.record_stream(torch.cuda.current_stream())
        return x @ w
