"""A captured prefetch reads a pinned source attribute; a weight update rebinds it instead of copying into it."""
import torch
from torch import nn


class PinnedWeightStreamer(nn.Module):
    def __init__(self, layer: nn.Linear):
        super().__init__()
        self.layer = layer
        self.stream = torch.cuda.Stream()
        self.host_w = layer.weight.detach().cpu().pin_memory()
        self.dev_w = torch.empty_like(layer.weight)

    def forward(self, x):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.dev_w.copy_(self.host_w, non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.stream)
        return torch.nn.functional.linear(x, self.dev_w, self.layer.bias)

    def update_weights(self, new_w):
        self.host_w = new_w.detach().cpu().pin_memory()

    def update_weights_in_place(self, new_w):
        self.host_w.copy_(new_w.detach().cpu())

    def swap_source(self, new_pinned):
        self.host_w.data = new_pinned
