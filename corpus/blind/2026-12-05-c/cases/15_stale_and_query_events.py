"""Events recorded in a forward and later queried/waited by the engine loop."""
import torch
from torch import nn


class TimedLayer(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.side = torch.cuda.Stream()
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.done = torch.cuda.Event()

    def forward(self, x):
        self.start.record()
        y = self.inner(x)
        self.end.record()
        self.done.record()
        return y

    def kernel_ms(self):
        return self.start.elapsed_time(self.end)

    def wait_done_on_side(self):
        self.side.wait_event(self.done)
        with torch.cuda.stream(self.side):
            pass
