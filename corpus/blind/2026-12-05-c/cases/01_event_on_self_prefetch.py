"""Layer offloader: prefetch of the next layer is started at the end of a forward and waited at the next one."""
import torch
from torch import nn


class PrefetchingOffloader(nn.Module):
    def __init__(self, layer: nn.Module, cpu_weight: torch.Tensor):
        super().__init__()
        self.layer = layer
        self.cpu_weight = cpu_weight.pin_memory()
        self.gpu_weight = torch.empty_like(cpu_weight, device="cuda")
        self.copy_stream = torch.cuda.Stream()
        self.ready = torch.cuda.Event()

    def start_prefetch(self):
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            self.gpu_weight.copy_(self.cpu_weight, non_blocking=True)
            self.ready.record()

    def forward(self, x):
        self.ready.wait()
        return self.layer(x) @ self.gpu_weight
