"""What the fixed-fixture builders share: the probe's own layer stack on the GPU, an all-on-GPU
reference, inputs, and a weight update that writes a host weight in place.

Each builder in this folder loads `offlint fix`'s output for one fixture (its `fixed` argument,
a file path), installs that module's offloading on this stack the way the fixture's own code
expects to be installed, and returns an `offlint.probing.entry.ProbedModel`: the probe's
`--entry` protocol drives it through the decode-graph life cycle (tests/test_fix_gpu.py).
The builders import this file as a sibling (the probe puts a builder's folder on `sys.path`
while it imports the builder). Importing it does no CUDA work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from offlint.probing.entry import ProbedModel, import_user_module
from offlint.probing.model import TORCH_DTYPES, LayerStack, build_stack, make_weights, random_input


def load_fixed(path: str) -> Any:
    """The fixed module, imported from its file (a setup error names the file and line)."""
    module, _ = import_user_module(path, "fixed module")
    return module


@dataclass
class Stack:
    """`layers` layers `tanh(x @ W)` on the GPU; the last of every `every` is to be offloaded."""

    model: LayerStack
    reference: LayerStack
    offloaded: list[int]
    hidden: int
    dtype: torch.dtype
    device: torch.device
    generator: torch.Generator

    def make_inputs(self, batch: int) -> torch.Tensor:
        return random_input(batch, self.hidden, self.dtype, self.device, self.generator)

    def new_weight(self) -> torch.Tensor:
        return make_weights(1, self.hidden, self.dtype, self.device, self.generator)[0]


def stack(layers: int, hidden: int, every: int, dtype: str) -> Stack:
    if layers < every:
        raise ValueError(f"{layers} layers offload none when every {every}th is offloaded")
    torch_dtype = TORCH_DTYPES[dtype]
    device = torch.device("cuda", torch.cuda.current_device())
    generator = torch.Generator(device=device)
    generator.manual_seed(0)
    weights = make_weights(layers, hidden, torch_dtype, device, generator)
    return Stack(
        model=build_stack(weights).to(device),
        reference=build_stack(weights).to(device),
        offloaded=[i for i in range(layers) if i % every == every - 1],
        hidden=hidden,
        dtype=torch_dtype,
        device=device,
        generator=generator,
    )


def probed(
    built: Stack,
    model: Callable[..., Any],
    host_of_first: Callable[[], torch.Tensor],
    name: str,
    host_tensors: list[torch.Tensor] | None = None,
) -> ProbedModel:
    """The ProbedModel of `model` on `built`. The weight update writes new values in place into
    the host copy of the first offloaded layer (`host_of_first()`) and into the reference: a
    graph re-reads that host address at every replay, so replays after it must match."""
    first = built.offloaded[0]

    def update_weights() -> str:
        new = built.new_weight()
        host = host_of_first()
        if host.device.type != "cpu":
            raise RuntimeError(f"layer {first}'s weight is on {host.device}, not in host memory")
        host.copy_(new.cpu())
        built.reference.layers[first].get_parameter("weight").copy_(new)
        return f"layer {first}'s host weight"

    return ProbedModel(
        model=model,
        make_inputs=built.make_inputs,
        reference=built.reference,
        update_weights=update_weights,
        expected_copies=len(built.offloaded),
        host_tensors=list(host_tensors or []),
        name=name,
    )
