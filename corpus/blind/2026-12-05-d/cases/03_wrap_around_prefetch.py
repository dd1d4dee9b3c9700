import torch
from torch import nn


class WrapAroundOffloadedStack(nn.Module):
    """Prefetches layer 0 for the *next* forward at the end of this one."""

    def __init__(self, weights_cpu):
        super().__init__()
        self.weights_cpu = weights_cpu  # pinned
        self.side = torch.cuda.Stream()
        self.slot = torch.empty_like(weights_cpu[0], device="cuda")

    def _issue(self, i):
        cur = torch.cuda.current_stream()
        self.side.wait_stream(cur)
        with torch.cuda.stream(self.side):
            self.slot.copy_(self.weights_cpu[i], non_blocking=True)

    def forward(self, x):
        torch.cuda.current_stream().wait_stream(self.side)
        for i in range(len(self.weights_cpu)):
            x = torch.tanh(x @ self.slot)
        self._issue(0)
        return x


class PrimedOffloadedStack(nn.Module):
    """Each forward issues its own first copy and joins it: nothing crosses a forward."""

    def __init__(self, weights_cpu):
        super().__init__()
        self.weights_cpu = weights_cpu
        self.side = torch.cuda.Stream()
        self.slot = torch.empty_like(weights_cpu[0], device="cuda")

    def forward(self, x):
        cur = torch.cuda.current_stream()
        self.side.wait_stream(cur)
        with torch.cuda.stream(self.side):
            self.slot.copy_(self.weights_cpu[0], non_blocking=True)
        cur.wait_stream(self.side)
        return torch.tanh(x @ self.slot)
