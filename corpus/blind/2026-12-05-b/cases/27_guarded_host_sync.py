"""Host syncs kept off the capture by an is_current_stream_capturing() test, a helper, or an early return."""
import torch
from torch import nn


def capturing() -> bool:
    return torch.cuda.is_current_stream_capturing()


class GuardedOffload(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.copy = torch.cuda.Stream()
        self.loaded = torch.cuda.Event()
        self.stats = {"bytes": 0}

    def forward(self, x):
        if not torch.cuda.is_current_stream_capturing():
            self.copy.synchronize()
        if not capturing():
            self.stats["bytes"] += int(x.sum().item())
        self._log(x)
        return self.block(x)

    def _log(self, x):
        if capturing():
            return
        print("mean", x.mean())

    def forward_flag(self, x):
        eager = not torch.cuda.is_current_stream_capturing()
        if eager:
            torch.cuda.synchronize()
        return self.block(x)


class UnguardedOffload(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.copy = torch.cuda.Stream()

    def forward(self, x):
        if x.abs().max() > 1e4:
            x = x.clamp(-1e4, 1e4)
        return self.block(x)
