# case: script: the same lambda-based join, but each forward forks the stream from its list before staging and joins it before use; captured at module level
import torch
from torch import nn

_streams = [torch.cuda.Stream()]
_fork = lambda s: s.wait_stream(torch.cuda.current_stream())
_join = lambda s: torch.cuda.current_stream().wait_stream(s)


class StagedModel(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.host_bias = torch.zeros(dim).pin_memory()
        self.dev_bias = torch.zeros(dim, device="cuda")

    def forward(self, x):
        side = _streams[0]
        _fork(side)
        with torch.cuda.stream(side):
            self.dev_bias.copy_(self.host_bias, non_blocking=True)
        _join(side)
        return self.proj(x) + self.dev_bias


model = StagedModel(256).cuda()
x = torch.randn(32, 256, device="cuda")
model(x)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = model(x)
g.replay()
