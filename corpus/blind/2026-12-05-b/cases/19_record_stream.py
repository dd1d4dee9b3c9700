"""record_stream placement: inside the side-stream block it names the wrong stream."""
import torch
from torch import nn


class RecordInside(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.side = torch.cuda.Stream()

    def forward(self, x, host_w):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            w = host_w.to("cuda", non_blocking=True)
            w.record_stream(torch.cuda.current_stream())
        torch.cuda.current_stream().wait_stream(self.side)
        return self.block(x, w)


class RecordOutside(nn.Module):
    def __init__(self, block, host_w):
        super().__init__()
        self.block = block
        self.side = torch.cuda.Stream()
        self.host_w = host_w.pin_memory()

    def forward(self, x):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            w = self.host_w.to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.side)
        w.record_stream(torch.cuda.current_stream())
        return self.block(x, w)
