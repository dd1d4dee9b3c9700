"""Capture-state checks in code that torch.compile traces."""
import torch
from torch import nn


class CompiledOffload(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.side = torch.cuda.Stream()

    @torch.compile(fullgraph=True)
    def forward(self, x):
        if torch.cuda.is_current_stream_capturing():
            return self.block(x)
        return self.block(x) * 1.0


@torch.compiler.disable
def _capture_aware_gate():
    return torch.cuda.is_current_stream_capturing()


@torch.library.custom_op("offl::maybe_wait", mutates_args=())
def maybe_wait(x: torch.Tensor) -> torch.Tensor:
    if not torch.cuda.is_current_stream_capturing():
        torch.cuda.current_stream().synchronize()
    return x.clone()


class CompiledButFenced(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.side = torch.cuda.Stream()

    @torch.compile
    def forward(self, x):
        if _capture_aware_gate():
            x = x + 0
        return self.block(maybe_wait(x))
