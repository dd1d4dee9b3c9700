"""A prefetching weight offloader in the style of vLLM's `PrefetchOffloader` (a look-alike
written for offlint, no vLLM import): the offloaded layers' weights live in pinned host memory
and are copied into a few static device slots on a copy stream, one offloaded layer ahead, with
the next forward's first layer prefetched at the end of each forward (wrap-around).

Capture-aware the way that design is: every copy is forked from the compute stream through an
event; a wait inside a capture on a copy issued before the capture is skipped (the slot already
holds the data); an eager wait on an event last recorded in a capture falls back to
`wait_stream`; the model's forward ends with a join of every copy the capture started. The
probe should find: capture, replays and eager-after-capture exact, one copy per offloaded layer
per replay. What it shows about the wrap-around: after an in-place update of a host weight, the
first replay still computes with the old weight of the first offloaded layer (its slot was
filled at the end of the previous replay), so the weight-update check fails for the first
replay only.

`offlint probe --entry prefetch-offload [--init-arg layers=16 --init-arg hidden=4096]`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from offlint.probing.entry import ProbedModel
from offlint.probing.examples._common import input_maker


class Layer(nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.weight)


class PrefetchOffloader:
    """Offloads `offloaded` layer indices into `num_slots` static device slots."""

    def __init__(self, layers: list[Layer], offloaded: list[int], num_slots: int = 2) -> None:
        self.copy_stream = torch.cuda.Stream()
        self.layers = layers
        self.offloaded = offloaded
        self.host = []
        for index in offloaded:
            param = layers[index].weight
            self.host.append(param.data.to("cpu").pin_memory())
        shape, dtype = self.host[0].shape, self.host[0].dtype
        self.slots = [torch.empty(shape, dtype=dtype, device="cuda") for _ in range(num_slots)]
        self.done = [torch.cuda.Event() for _ in offloaded]
        self.in_capture = [False] * len(offloaded)
        self.event_valid = [False] * len(offloaded)
        self.pending: list[int] = []  # copies started in the capture and not yet waited on
        for position, index in enumerate(offloaded):
            layers[index].weight.data = self.slots[position % num_slots]

    def prefetch(self, position: int) -> None:
        capturing = torch.cuda.is_current_stream_capturing()
        fork = torch.cuda.Event()
        torch.cuda.current_stream().record_event(fork)
        self.copy_stream.wait_event(fork)
        with torch.cuda.stream(self.copy_stream):
            slot = self.slots[position % len(self.slots)]
            slot.copy_(self.host[position], non_blocking=True)
        self.done[position].record(self.copy_stream)
        self.in_capture[position] = capturing
        self.event_valid[position] = not capturing
        if capturing:
            self.pending.append(position)

    def wait(self, position: int) -> None:
        if torch.cuda.is_current_stream_capturing():
            if not self.in_capture[position]:
                return  # copied before the capture began: the slot holds the data already
            torch.cuda.current_stream().wait_event(self.done[position])
            if position in self.pending:
                self.pending.remove(position)
        elif self.event_valid[position]:
            torch.cuda.current_stream().wait_event(self.done[position])
        else:
            torch.cuda.current_stream().wait_stream(self.copy_stream)

    def join_after_forward(self) -> None:
        for position in self.pending:
            # pending holds only copies this capture recorded: a legal wait
            torch.cuda.current_stream().wait_event(self.done[position])  # offlint: ignore[OFL101]
        self.pending.clear()


class OffloadedStack(nn.Module):
    def __init__(self, layers: list[Layer], offloader: PrefetchOffloader) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.offloader = offloader
        self.position_of = {index: pos for pos, index in enumerate(offloader.offloaded)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offloader = self.offloader
        count = len(offloader.offloaded)
        for index, layer in enumerate(self.layers):
            position = self.position_of.get(index)
            if position is not None:
                offloader.wait(position)
            x = layer(x)
            if position is not None:
                offloader.prefetch((position + 1) % count)  # wraps around to the next forward
        offloader.join_after_forward()
        return x


def build(
    layers: int = 16, hidden: int = 4096, every: int = 4, dtype: str = "bfloat16"
) -> ProbedModel:
    torch_dtype = getattr(torch, dtype)
    scale = 2.0 / hidden**0.5
    weights = [
        (torch.randn(hidden, hidden, device="cuda") * scale).to(torch_dtype) for _ in range(layers)
    ]
    reference = nn.Sequential(*(Layer(w.clone()) for w in weights)).eval()
    stack_layers = [Layer(w.clone()) for w in weights]
    offloaded = [i for i in range(layers) if i % every == every - 1]
    offloader = PrefetchOffloader(stack_layers, offloaded, num_slots=2)
    model = OffloadedStack(stack_layers, offloader).eval()
    offloader.prefetch(0)  # post-init: the first offloaded layer, for the first forward

    def update_weights() -> Any:
        first = offloaded[0]
        new = (torch.randn(hidden, hidden, device="cuda") * scale).to(torch_dtype)
        offloader.host[0].copy_(new.cpu())  # in place: the graphs keep this host address
        reference[first].get_parameter("weight").copy_(new)
        return f"layer {first}'s host weight"

    return ProbedModel(
        model=model,
        make_inputs=input_maker(hidden, torch_dtype),
        reference=reference,
        batch_sizes=(4096, 2048),
        update_weights=update_weights,
        expected_copies=len(offloaded),
        host_tensors=offloader.host,
        name="vLLM-style prefetch offloading",
    )
