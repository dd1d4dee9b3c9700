import torch
from torch import nn


class CopyThenCompute(nn.Module):
    def __init__(self, w_cpu):
        super().__init__()
        self.w_cpu = w_cpu.pin_memory()
        self.w_gpu = torch.empty_like(w_cpu, device="cuda")
        self.loader = torch.cuda.Stream()

    def forward(self, x):
        with torch.cuda.stream(self.loader):
            self.w_gpu.copy_(self.w_cpu, non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.loader)
        return x @ self.w_gpu


class DefaultStreamStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.done = torch.cuda.Event()

    def forward(self, x):
        with torch.cuda.stream(torch.cuda.default_stream()):
            y = x * 2
            self.done.record()
        torch.cuda.current_stream().wait_event(self.done)
        return y


class ForkedStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.aux = torch.cuda.Stream()

    def forward(self, x):
        self.aux.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.aux):
            y = x * 2
        torch.cuda.current_stream().wait_stream(self.aux)
        return y
