import torch
from torch import nn


class Router(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.proj = nn.Linear(n, n)

    def forward(self, x):
        scores = self.proj(x)
        top = scores.argmax(-1).tolist()
        return scores, top

    def describe(self, x):
        return self.proj(x).argmax(-1).tolist()


def build(n):
    r = Router(n)
    r.cuda()
    sample = torch.randn(8, n, device="cuda")
    graphed = torch.cuda.make_graphed_callables(r, (sample,))
    return graphed
