"""What the bundled examples share: a stack of Linear + GELU blocks and a GPU reference copy."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.linear(x))


class Stack(nn.Module):
    """`blocks` Blocks in a ModuleList, and optionally a projection outside it (as many real
    models have: an embedding or a final norm that is not one of the repeated layers)."""

    def __init__(self, hidden: int, blocks: int, outside_layer: bool = False) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(hidden) for _ in range(blocks))
        self.proj_out = nn.Linear(hidden, hidden) if outside_layer else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        if self.proj_out is not None:
            x = self.proj_out(x)
        return x


def gpu_stack(hidden: int, blocks: int, dtype: torch.dtype, outside_layer: bool = False) -> Stack:
    model = Stack(hidden, blocks, outside_layer)
    with torch.no_grad():
        for parameter in model.parameters():
            # gain so that activations neither vanish nor saturate: a wrong weight shows
            parameter.mul_(2.0)
    return model.to("cuda", dtype).eval()


def reference_of(model: nn.Module) -> nn.Module:
    """A copy that stays on the GPU: what the offloaded model must compute."""
    return copy.deepcopy(model).eval()


def input_maker(hidden: int, dtype: torch.dtype) -> Callable[[int], torch.Tensor]:
    def make_inputs(batch_size: int) -> torch.Tensor:
        return torch.randn(batch_size, hidden, device="cuda").to(dtype)

    return make_inputs
