import torch
from torch import nn


def capturing():
    return torch.cuda.is_current_stream_capturing()


class InlineWhenCapturing(nn.Module):
    def __init__(self, w_cpu):
        super().__init__()
        self.w_cpu = w_cpu.pin_memory()
        self.side = torch.cuda.Stream()
        self.ev = torch.cuda.Event()
        self.staged = None

    def prefetch(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.staged = self.w_cpu.to("cuda", non_blocking=True)
            self.ev.record()

    def forward(self, x):
        if capturing():
            w = self.w_cpu.to("cuda", non_blocking=True)
        else:
            self.ev.wait()
            w = self.staged
        return x @ w


class EarlyReturnGuard(nn.Module):
    def __init__(self):
        super().__init__()
        self.copy_stream = torch.cuda.Stream()
        self.done = torch.cuda.Event()

    def forward(self, x):
        if torch.cuda.is_current_stream_capturing():
            return x * 2
        self.done.synchronize()
        return x * 2


class CaptureMadeState(nn.Module):
    def __init__(self, w_cpu):
        super().__init__()
        self.w_cpu = w_cpu.pin_memory()
        self.side = torch.cuda.Stream()
        self.cached = None

    def forward(self, x):
        if torch.cuda.is_current_stream_capturing():
            self.cached = self.w_cpu.to("cuda", non_blocking=True)
        elif self.cached is None:
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                self.cached = self.w_cpu.to("cuda", non_blocking=True)
            torch.cuda.current_stream().wait_stream(self.side)
        return x @ self.cached
