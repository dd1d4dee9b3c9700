# case: script: a rotary layer gathers its cos/sin rows on a side stream and calls the base class's forward via super() before joining; the script captures and replays it
import torch
from torch import nn


class RotaryBase(nn.Module):
    @staticmethod
    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, q, cos, sin):
        return q * cos + self.rotate_half(q) * sin


class SideGatherRotary(RotaryBase):
    def __init__(self, max_pos, dim):
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, dim, 2, device="cuda").float() / dim))
        ang = torch.arange(max_pos, device="cuda").float()[:, None] * inv[None, :]
        self.cos_table = torch.cat([ang.cos(), ang.cos()], dim=-1)
        self.sin_table = torch.cat([ang.sin(), ang.sin()], dim=-1)
        self.side = torch.cuda.Stream()

    def forward(self, q, positions):
        cur = torch.cuda.current_stream()
        self.side.wait_stream(cur)
        with torch.cuda.stream(self.side):
            cos = self.cos_table[positions]
            sin = self.sin_table[positions]
        out = super().forward(q, cos, sin)  # expect: OFL205
        cur.wait_stream(self.side)
        return out


rope = SideGatherRotary(4096, 128)
q = torch.randn(64, 128, device="cuda")
pos = torch.arange(64, device="cuda")
rope(q, pos)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    out = rope(q, pos)
g.replay()
