"""Wrap-around prefetch: the copy for the next forward is forked at the end of this one and joined by wait_stream at the start of the next."""
import torch
from torch import nn


class WrapAroundPrefetch(nn.Module):
    def __init__(self, blocks, host_weights):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.host_weights = [w.pin_memory() for w in host_weights]
        self.slots = [torch.empty_like(w, device="cuda") for w in host_weights]
        self.side = torch.cuda.Stream()

    def _issue(self, i):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.slots[i].copy_(self.host_weights[i], non_blocking=True)

    def forward(self, x):
        torch.cuda.current_stream().wait_stream(self.side)
        for blk, w in zip(self.blocks, self.slots):
            x = blk(x) + w.sum()
        self._issue(0)
        return x
