# case: primed static-slot offloading: each forward issues its own first copies at its start through closures over a slot list, every fork is joined inside the forward; SlotGraphRunner captures two batch sizes with a shared pool
import torch
from torch import nn


def make_slot_ops(host_weights, slots, stream):
    """Closures that copy offloaded layer i into slot i % len(slots) and join it."""

    def issue(i):
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            slots[i % len(slots)].copy_(host_weights[i], non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
        return ev

    def take(i, ev):
        torch.cuda.current_stream().wait_event(ev)
        return slots[i % len(slots)]

    return issue, take


class PrimedOffloadStack(nn.Module):
    def __init__(self, n_offloaded, dim, n_slots=2):
        super().__init__()
        self.host = [torch.randn(dim, dim, dtype=torch.bfloat16).pin_memory() for _ in range(n_offloaded)]
        self.slots = [torch.empty(dim, dim, dtype=torch.bfloat16, device="cuda") for _ in range(n_slots)]
        self.n = n_offloaded
        self.issue, self.take = make_slot_ops(self.host, self.slots, torch.cuda.Stream())

    def forward(self, x):
        pending = [self.issue(0)]
        for i in range(self.n):
            w = self.take(i, pending[i])
            y = torch.tanh(x @ w)
            if i + 1 < self.n:
                # slot (i+1) % 2 is free once layer i-1 has run; the copy is ordered after it by the fork
                pending.append(self.issue(i + 1))
            x = y
        return x


class SlotGraphRunner:
    def __init__(self, model, dim, batch_sizes=(2048, 4096)):
        self.model = model
        self.dim = dim
        self.batch_sizes = batch_sizes
        self.graphs = {}

    def capture(self):
        pool = None
        for bs in sorted(self.batch_sizes, reverse=True):
            x = torch.zeros(bs, self.dim, dtype=torch.bfloat16, device="cuda")
            self.model(x)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                y = self.model(x)
            pool = g.pool()
            self.graphs[bs] = (g, x, y)
