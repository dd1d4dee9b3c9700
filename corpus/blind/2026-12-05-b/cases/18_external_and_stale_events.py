"""Events that cross capture boundaries: external=True is legal, a plain event goes stale."""
import torch
from torch import nn


class CrossGraphHandoff(nn.Module):
    """Recorded in one graph, waited in the next: external events make both graph nodes."""

    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b
        self.side = torch.cuda.Stream()
        self.handoff = torch.cuda.Event(external=True)

    def first(self, x):
        y = self.a(x)
        self.handoff.record()
        return y

    def forward(self, y):
        torch.cuda.current_stream().wait_event(self.handoff)
        return self.b(y)


class StaleHandoff:
    def __init__(self, a, b):
        self.a, self.b = a, b
        self.done = torch.cuda.Event()

    def produce(self, x):
        y = self.a(x)
        self.done.record()
        return y

    def consume_eager(self, y):
        torch.cuda.current_stream().wait_event(self.done)
        return self.b(y)


def capture_then_run(a, b, x):
    h = StaleHandoff(a, b)
    h.produce(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = h.produce(x)
    g.replay()
    return h.consume_eager(y)
