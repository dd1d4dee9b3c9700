import contextlib

import torch
from torch import nn

side = torch.cuda.Stream()


@contextlib.contextmanager
def on_side(stream):
    yield stream
    torch.cuda.current_stream().synchronize()


class Block(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.host = w.pin_memory()

    def forward(self, x):
        with on_side(side) as s, torch.cuda.stream(s):
            w = self.host.to("cuda", non_blocking=True)
        return x @ w
