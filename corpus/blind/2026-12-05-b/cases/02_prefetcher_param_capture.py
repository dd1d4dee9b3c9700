"""Graph runner that hands an untyped prefetcher into the function that captures."""
import torch


class LayerPrefetcher:
    def __init__(self, layers):
        self.layers = layers
        self.stream = torch.cuda.Stream()
        self.events = [torch.cuda.Event() for _ in layers]

    def issue(self, i):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.layers[i].load_async()
        self.events[i].record(self.stream)

    def acquire(self, i):
        ev = self.events[i]
        ev.wait()
        return self.layers[i]


def run_layers(x, pf, n):
    for i in range(n):
        layer = pf.acquire(i)
        x = layer(x)
    return x


def capture(x, pf, n):
    pf.issue(0)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = run_layers(x, pf, n)
    return g, y
