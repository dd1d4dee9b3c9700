"""Events queried inside the captured step, timing events recorded in it, and the legal timing driver."""
import torch
from torch import nn


class ProgressTracker(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body
        self.done = torch.cuda.Event()
        self.t0 = torch.cuda.Event(enable_timing=True)
        self.t1 = torch.cuda.Event(enable_timing=True)

    def step(self, x):
        self.t0.record()
        y = self.body(x)
        self.done.record()
        if not self.done.query():
            y = y * 1.0
        self.t1.record()
        return y


def capture_and_time(tracker: ProgressTracker, x):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        tracker.step(x)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        out = tracker.step(x)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    g.replay()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    return out, ms
