"""`offlint fix`'s output for fixtures/capture_hazards_zoo.py: its `LayerOffloader` on the
offloaded layers of the stack. The offloader copies each layer's pinned host weight into a static
device buffer on its copy stream and its pre-hook hands the buffer to the layer as `weight` (a
plain attribute here: a Parameter would refuse the assignment).

The fix rewrites the OFL101/OFL103 handoff (`prefetch` -> `wait_and_get`, the wrap-around
prefetch of `_post_hook`) and leaves the OFL105 host sync in `_pre_hook` (a range check with
`.item()`; OFL105 has no fix, and `offlint fix` says "1 hazard(s) left"). With
`range_check=True` the pre-hook runs as written and a capture must fail there (900); with
`range_check=False` (the default) a subclass replaces `_pre_hook` by its first statement only,
so that the life cycle exercises what the fix changed. The module's other hazards (`drain`,
`evict`, `load_bias`, `DecodeRunner`'s timing events) are not on the forward path and are not
called.

`build(fixed=PATH)`; the probe's `--init-arg` values are the other keyword arguments.
"""

from __future__ import annotations

from typing import Any

import torch
from fixed_entry_stack import load_fixed, probed, stack
from torch import nn

from offlint.probing.entry import ProbedModel

OFFLOADER = "LayerOffloader"


class SlotLayer(nn.Module):
    """An offloaded layer: `weight` is set by the offloader's pre-hook before every call."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.weight: torch.Tensor | None = None
        # What the fixture's range check reads (on the GPU, so `.item()` syncs with the host).
        self.scale = torch.ones(1, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert self.weight is not None
        return torch.tanh(x @ self.weight)


def _without_range_check(offloader_class: type) -> type:
    class WithoutRangeCheck(offloader_class):
        def _pre_hook(self, module: nn.Module, args: Any) -> None:
            module.weight = self.wait_and_get(module.layer_index)

    return WithoutRangeCheck


def build(
    fixed: str,
    layers: int = 8,
    hidden: int = 1024,
    every: int = 2,
    dtype: str = "bfloat16",
    range_check: bool = False,
) -> ProbedModel:
    module = load_fixed(fixed)
    built = stack(layers, hidden, every, dtype)
    host_weights = []
    slots = []
    for index in built.offloaded:
        host_weights.append(built.model.layers[index].get_parameter("weight").detach().cpu())
        slot = SlotLayer(built.device)
        built.model.layers[index] = slot
        slots.append(slot)
    offloader_class = getattr(module, OFFLOADER)
    if not range_check:
        offloader_class = _without_range_check(offloader_class)
    offloader = offloader_class(slots, host_weights)
    built.model._offloader = offloader  # kept alive with the model
    return probed(
        built,
        built.model,
        host_of_first=lambda: offloader.host[0],
        name="layer offloader" + (" with its range check" if range_check else ""),
        host_tensors=offloader.host,
    )
