# case: a swap-in block decides through a property derived from is_current_stream_capturing() whether to drain its copy stream; the block is wrapped with torch.cuda.make_graphed_callables
import torch
from torch import nn


class SwapInBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.copy_stream = torch.cuda.Stream()
        self.done = torch.cuda.Event()
        self.pending = False

    @property
    def capturing(self):
        return torch.cuda.is_current_stream_capturing()

    def forward(self, x):
        if self.pending and not self.capturing:
            self.done.synchronize()
            self.pending = False
        return torch.relu(self.fc(x))

    def swap_in(self, host, dev):
        """Called by the scheduler between steps, never from forward."""
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            dev.copy_(host, non_blocking=True)
            self.done.record()
        self.pending = True


def graphed(dim=1024, batch=16):
    block = SwapInBlock(dim).cuda()
    sample = torch.randn(batch, dim, device="cuda", requires_grad=True)
    return torch.cuda.make_graphed_callables(block, (sample,))
