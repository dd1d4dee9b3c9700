# case: per-layer loaders prebuilt with functools.partial over host weights read by torch.load; the decode step is captured with capture_begin()/capture_end()
import functools

import torch
from torch import nn


class PartialLoaderStack(nn.Module):
    def __init__(self, ckpt_path, hidden):
        super().__init__()
        state = torch.load(ckpt_path, map_location="cpu")
        self.host = tuple(state[f"layers.{i}.weight"] for i in range(len(state)))
        self.slots = tuple(torch.empty(hidden, hidden, device="cuda") for _ in self.host)
        self.loaders = tuple(
            functools.partial(slot.copy_, src, non_blocking=True)  # alt: OFL106
            for slot, src in zip(self.slots, self.host)
        )

    def forward(self, x):
        for load, slot in zip(self.loaders, self.slots):
            load()  # expect: OFL106
            x = torch.relu(x @ slot)
        return x


def capture(stack, x):
    stack(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g.capture_begin()
        try:
            y = stack(x)
        finally:
            g.capture_end()
    torch.cuda.current_stream().wait_stream(s)
    return g, y
