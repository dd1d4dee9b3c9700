"""Training block graphed with make_graphed_callables; its forward logs the loss scale via .cpu()."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)
        self.scale = torch.ones(1, device="cuda")

    def forward(self, x):
        s = self.scale.cpu()
        return self.fc(x) * float(s)


def build():
    blk = Block().cuda()
    sample = torch.randn(8, 256, device="cuda", requires_grad=True)
    return torch.cuda.make_graphed_callables(blk, (sample,))
