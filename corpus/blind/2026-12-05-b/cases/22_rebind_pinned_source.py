"""Re-pinning host weights after the graph was captured: replays keep the old address."""
import torch
from torch import nn


class PinnedSourceLayer(nn.Module):
    def __init__(self, w_cpu):
        super().__init__()
        self.side = torch.cuda.Stream()
        self.host_w = w_cpu.pin_memory()
        self.dev_w = torch.empty_like(self.host_w, device="cuda")

    def forward(self, x):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.dev_w.copy_(self.host_w, non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.side)
        return x @ self.dev_w

    def update_weights(self, new_cpu):
        self.host_w = new_cpu.pin_memory()

    def update_weights_in_place(self, new_cpu):
        self.host_w.copy_(new_cpu)


def capture(layer, x):
    layer(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = layer(x)
    return g, y
