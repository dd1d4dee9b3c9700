"""Offload copies started in eager breaks of a segmented (breakable) capture."""
import torch
from torch import nn

from engine.breakable_graph import eager_break_during_capture


class SegmentedPrefetch(nn.Module):
    """Fork in one eager break, join in a later break of the same forward: legal."""

    def __init__(self, pre, post, host_w):
        super().__init__()
        self.pre, self.post = pre, post
        self.side = torch.cuda.Stream()
        self.host = host_w.pin_memory()
        self.dev = torch.empty_like(self.host, device="cuda")

    @eager_break_during_capture
    def start(self):
        torch.cuda.synchronize()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.dev.copy_(self.host, non_blocking=True)

    @eager_break_during_capture
    def finish(self):
        torch.cuda.current_stream().wait_stream(self.side)

    def forward(self, x):
        self.start()
        y = self.pre(x)
        self.finish()
        return self.post(y, self.dev)


class LeakyBreakPrefetch(nn.Module):
    """Fork in an eager break, join left to the next captured segment."""

    def __init__(self, pre, post, host_w):
        super().__init__()
        self.pre, self.post = pre, post
        self.side = torch.cuda.Stream()
        self.host = host_w.pin_memory()
        self.dev = torch.empty_like(self.host, device="cuda")

    @eager_break_during_capture
    def start(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.dev.copy_(self.host, non_blocking=True)

    def forward(self, x):
        self.start()
        y = self.pre(x)
        torch.cuda.current_stream().wait_stream(self.side)
        return self.post(y, self.dev)
