# case: a decode prefetcher keeps its "weights ready" event on self and exposes its wait as a bound-method alias; the same event is recorded inside a captured decode step and later waited on by eager prefill; capture_decode() drives the capture
import torch
from torch import nn


class ReadyPrefetcher:
    def __init__(self, host, dev):
        self.host = host
        self.dev = dev
        self.stream = torch.cuda.Stream()
        self.ready = torch.cuda.Event()
        self.wait_ready = self.ready.wait

    def issue(self):
        cur = torch.cuda.current_stream()
        self.stream.wait_stream(cur)
        with torch.cuda.stream(self.stream):
            self.dev.copy_(self.host, non_blocking=True)
            self.ready.record()
        cur.wait_stream(self.stream)


class DecodeLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.prefetcher = ReadyPrefetcher(torch.randn(dim, dim).pin_memory(),
                                          torch.empty(dim, dim, device="cuda"))

    def forward(self, x):
        self.prefetcher.issue()
        return x @ self.prefetcher.dev


def prefill(layer, x):
    # eager path: only wait for the copy, do not issue a new one
    layer.prefetcher.wait_ready()  # expect: OFL202
    return x @ layer.prefetcher.dev


def capture_decode(layer, x):
    layer(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = layer(x)
    return g, y
