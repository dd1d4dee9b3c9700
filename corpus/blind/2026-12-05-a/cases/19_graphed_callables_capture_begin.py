"""High-confidence capture regions: make_graphed_callables and capture_begin()/capture_end()."""
import torch
from torch import nn


class NormWithStats(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.max_seen = 0.0

    def forward(self, x):
        y = self.norm(x)
        self.max_seen = max(self.max_seen, y.abs().max().item())
        return y


def build(dim, x):
    block = NormWithStats(dim)
    block.cuda()
    graphed = torch.cuda.make_graphed_callables(block, (x,))
    return graphed


def _step(model, static_x):
    out = model(static_x)
    torch.cuda.synchronize()
    return out


def capture_manually(model, static_x):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g.capture_begin()
        out = _step(model, static_x)
        g.capture_end()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    return g, out
