import functools

import torch
from torch import nn


class Loader:
    def __init__(self, w):
        self.cpu = w.cpu().pin_memory()
        self.stream = torch.cuda.Stream()
        self.ready = torch.cuda.Event()
        self.gpu = None

    def start(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.gpu = self.cpu.to("cuda", non_blocking=True)
        self.ready.record(self.stream)


def onload(method):
    @functools.wraps(method)
    def wrapper(self, x):
        self.loader.ready.wait()
        return method(self, x)
    return wrapper


class Layer(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.loader = Loader(w)

    @onload
    def forward(self, x):
        return x @ self.loader.gpu
