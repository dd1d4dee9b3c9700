"""The synthetic model the probe offloads, and the all-on-GPU reference it is checked against.

`layers` layers `y = tanh(x @ W)`, each W of `hidden` x `hidden`. Every layer is called through
`layer(x)` (`Module.__call__`), so forward pre-hooks and replaced `forward`s run exactly as they
do in an inference engine's model. Weights are drawn with gain 2 so the activations neither
vanish nor saturate over the layers: a wrong weight changes the output visibly.
"""

from __future__ import annotations

import math

import torch
from torch import nn

TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
_GAIN = 2.0


class TanhLayer(nn.Module):
    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.weight)


class LayerStack(nn.Module):
    def __init__(self, layers: list[nn.Module]):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def make_weights(
    layers: int, hidden: int, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> list[torch.Tensor]:
    scale = _GAIN / math.sqrt(hidden)
    return [
        (torch.randn(hidden, hidden, device=device, generator=generator) * scale).to(dtype)
        for _ in range(layers)
    ]


def build_stack(weights: list[torch.Tensor]) -> LayerStack:
    """A model owning its own copies of `weights` (so offloading one model leaves the other)."""
    return LayerStack([TanhLayer(weight.clone()) for weight in weights])


def random_input(
    batch: int, hidden: int, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> torch.Tensor:
    return torch.randn(batch, hidden, device=device, generator=generator).to(dtype)


def relative_error(output: torch.Tensor, reference: torch.Tensor) -> float:
    """‖output − reference‖ / ‖reference‖ in float32; inf when the output has NaN/inf or the
    shapes differ (a wrong result must never pass)."""
    if output.shape != reference.shape:
        return math.inf
    out = output.float()
    ref = reference.float()
    if not bool(torch.isfinite(out).all()):
        return math.inf
    denominator = float(ref.norm())
    numerator = float((out - ref).norm())
    if denominator == 0.0:
        return 0.0 if numerator == 0.0 else math.inf
    return numerator / denominator
