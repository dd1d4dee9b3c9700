import torch
import torch as T
from torch import nn
from torch.cuda import graph as cg

cuda = torch.cuda


class GenericApiOffloader(nn.Module):
    def __init__(self, w_cpu):
        super().__init__()
        self.w_cpu = w_cpu.pin_memory()
        self.copy_stream = torch.Stream(device="cuda")
        self.copied = torch.Event()
        self.slot = torch.empty_like(w_cpu, device="cuda")

    def start_copy(self):
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            self.slot.copy_(self.w_cpu, non_blocking=True)
        self.copied.record(self.copy_stream)

    def forward(self, x):
        self.copied.wait()
        return x @ self.slot


def _norm_check(y):
    cuda.synchronize()
    return y


def run(x, w):
    g = T.cuda.CUDAGraph()
    with cg(g):
        y = _norm_check(x @ w)
    return g, y
