"""Primed static-slot offloading: every fork is issued and joined inside one forward call."""
import torch
from torch import nn


class PrimedOffloadedStack(nn.Module):
    def __init__(self, layers, offloaded_idx):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.offloaded = set(offloaded_idx)
        self.copy_stream = torch.cuda.Stream()
        self.host = {i: layers[i].weight.detach().cpu().pin_memory() for i in self.offloaded}
        self.slots = [torch.empty_like(layers[i].weight) for i in range(2)]

    def _issue(self, i, slot):
        ev = torch.cuda.Event()
        with torch.cuda.stream(self.copy_stream):
            slot.copy_(self.host[i], non_blocking=True)
            ev.record()
        return ev

    def forward(self, x):
        order = sorted(self.offloaded)
        pending = {}
        fork = torch.cuda.Event()
        fork.record()
        self.copy_stream.wait_event(fork)
        if order:
            pending[order[0]] = self._issue(order[0], self.slots[0])
        k = 0
        for i, layer in enumerate(self.layers):
            if i in pending:
                torch.cuda.current_stream().wait_event(pending.pop(i))
                w = self.slots[k % 2]
                k += 1
                if k < len(order):
                    self.copy_stream.wait_stream(torch.cuda.current_stream())
                    pending[order[k]] = self._issue(order[k], self.slots[k % 2])
                x = torch.nn.functional.linear(x, w, layer.bias)
            else:
                x = layer(x)
        torch.cuda.current_stream().wait_stream(self.copy_stream)
        return x
