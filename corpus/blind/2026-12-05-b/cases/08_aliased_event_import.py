"""Timing events imported under an alias and recorded inside the captured step."""
import torch
from torch.cuda import Event as E


class TimedStep:
    def __init__(self, model):
        self.model = model
        self.t0 = E(enable_timing=True)
        self.t1 = E(enable_timing=True)

    def step(self, x):
        self.t0.record()
        y = self.model(x)
        self.t1.record()
        return y

    def last_ms(self):
        return self.t0.elapsed_time(self.t1)


def capture(model, x):
    ts = TimedStep(model)
    ts.step(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ts.step(x)
    g.replay()
    return ts.last_ms(), y


def time_replay(g):
    a = E(enable_timing=True)
    b = E(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)
