# case: notebook cell: layers hand the previous layer's prefetch event to a helper as an untyped argument, which polls it to skip the wait; the cell captures the stack with torch.cuda.graph
import torch
from torch import nn


def wait_if_pending(ev, stream=None):
    if ev is None or ev.query():  # expect: OFL107
        return
    (stream or torch.cuda.current_stream()).wait_event(ev)


class PrefetchLayer(nn.Module):
    def __init__(self, dim, side):
        super().__init__()
        self.host = torch.randn(dim, dim).pin_memory()
        self.slot = torch.empty(dim, dim, device="cuda")
        self.side = side

    def prefetch(self):
        self.side.wait_stream(torch.cuda.current_stream())  # allow: OFL103
        with torch.cuda.stream(self.side):
            self.slot.copy_(self.host, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
        return ev

    def forward(self, x, ev=None):
        wait_if_pending(ev)
        return torch.relu(x @ self.slot)


class Stack(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        side = torch.cuda.Stream()
        self.layers = nn.ModuleList(PrefetchLayer(dim, side) for _ in range(n))

    def forward(self, x):
        ev = self.layers[0].prefetch()
        for i, layer in enumerate(self.layers):
            nxt = self.layers[i + 1].prefetch() if i + 1 < len(self.layers) else None
            x = layer(x, ev)
            ev = nxt
        return x


# %%
stack = Stack(4, 512)
x = torch.randn(16, 512, device="cuda")
stack(x)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = stack(x)
