"""Per-layer events kept in a dict; a twin that uses external events."""
import torch
from torch import nn


class DictEventOffloader(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.side = torch.cuda.Stream()
        self.ready = {}

    def prefetch(self, i):
        ev = torch.cuda.Event()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.blocks[i].to("cuda", non_blocking=True)
        ev.record(self.side)
        self.ready[i] = ev

    def forward(self, x):
        for i, blk in enumerate(self.blocks):
            torch.cuda.current_stream().wait_event(self.ready[i])
            x = blk(x)
        return x


class ExternalEventOffloader(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.side = torch.cuda.Stream()
        self.ready = [torch.cuda.Event(external=True) for _ in blocks]

    def forward(self, x):
        for i, blk in enumerate(self.blocks):
            torch.cuda.current_stream().wait_event(self.ready[i])
            x = blk(x)
        return x
