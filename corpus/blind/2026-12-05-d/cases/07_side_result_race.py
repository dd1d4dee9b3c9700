import torch
from torch import nn


class RacyProjection(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w
        self.side = torch.cuda.Stream()

    def forward(self, x):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            h = x @ self.w
        out = h + 1
        return out


class JoinedProjection(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w
        self.side = torch.cuda.Stream()
        self.done = torch.cuda.Event()

    def forward(self, x):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            h = x @ self.w
            self.done.record()
        torch.cuda.current_stream().wait_event(self.done)
        out = h + 1
        return out
