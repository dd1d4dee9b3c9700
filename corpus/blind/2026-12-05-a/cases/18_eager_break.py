"""Segmented capture: layer loading runs in an eager break between captured segments."""
import torch
from torch import nn

from sglang.srt.model_executor.breakable_cuda_graph import eager_break_during_capture


class BreakLoader:
    def __init__(self, host_layers):
        self.copy_stream = torch.cuda.Stream()
        self.host_layers = [h.pin_memory() for h in host_layers]
        self.slots = [torch.empty_like(h, device="cuda") for h in host_layers]

    @eager_break_during_capture
    def load(self, i):
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            self.slots[i].copy_(self.host_layers[i], non_blocking=True)
        self.copy_stream.synchronize()
        torch.cuda.current_stream().wait_stream(self.copy_stream)


class BrokenModel(nn.Module):
    def __init__(self, layers, loader: BreakLoader):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.loader = loader
        self.stream = torch.cuda.Stream()

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            self.loader.load(i)
            x = layer(x)
        return x
