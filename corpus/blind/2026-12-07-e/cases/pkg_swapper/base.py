import torch
from torch import nn


class SwapBase(nn.Module):
    """Keeps a pinned host copy of a weight and a device slot it is swapped into."""

    def __init__(self, shape, dtype=torch.bfloat16):
        super().__init__()
        self.host = torch.empty(shape, dtype=dtype, pin_memory=True)
        self.slot = torch.empty(shape, dtype=dtype, device="cuda")
        self.copy_stream = torch.cuda.Stream()
        self.ready = torch.cuda.Event()

    def issue_copy(self):
        self.copy_stream.wait_stream(torch.cuda.current_stream())  # expect: OFL103
        with torch.cuda.stream(self.copy_stream):
            self.slot.copy_(self.host, non_blocking=True)
            self.ready.record()

    def forward(self, x):
        torch.cuda.current_stream().wait_event(self.ready)  # expect: OFL101
        return x
