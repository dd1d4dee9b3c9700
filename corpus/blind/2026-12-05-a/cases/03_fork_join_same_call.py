"""Correct overlap: every fork is joined in the same forward; record_stream on the consumer stream."""
import torch
from torch import nn


class OverlappedUpload(nn.Module):
    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.linear = linear
        self.side = torch.cuda.Stream()
        self.host_w = torch.empty(linear.weight.shape, dtype=linear.weight.dtype, pin_memory=True)
        self.host_w.copy_(linear.weight.detach().cpu())
        self.dev_w = torch.empty_like(linear.weight)

    def forward(self, x):
        cur = torch.cuda.current_stream()
        self.side.wait_stream(cur)
        with torch.cuda.stream(self.side):
            self.dev_w.copy_(self.host_w, non_blocking=True)
        y = torch.relu(x)
        cur.wait_stream(self.side)
        self.dev_w.record_stream(cur)
        return torch.nn.functional.linear(y, self.dev_w, self.linear.bias)


class EventForkJoin(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.side = torch.cuda.Stream()
        self.staging = torch.empty(1 << 20, pin_memory=True)
        self.buf = torch.empty(1 << 20, device="cuda")

    def forward(self, x):
        start = torch.cuda.Event()
        start.record()
        self.side.wait_event(start)
        with torch.cuda.stream(self.side):
            self.buf.copy_(self.staging, non_blocking=True)
        done = torch.cuda.Event()
        done.record(self.side)
        out = self.block(x)
        torch.cuda.current_stream().wait_event(done)
        return out + self.buf[: out.numel()].view_as(out)
