"""Group offloading in the style of diffusers' `apply_group_offloading` (a look-alike written for
offlint, no diffusers import), in the three set-ups shared/GROUND-TRUTH.md §3 measured:

- `variant="stream"` (default): block-level groups (one block per group), `use_stream=True`,
  every layer in the ModuleList. Each group's onload first waits for the copy stream with
  `self.stream.synchronize()`, then issues its copies there and prefetches the next group. The
  probe should find: the capture fails with 900 cudaErrorStreamCaptureUnsupported at the root of
  PyTorch's 901 (raised only at the capture's end, with no line), and the sanitizer names
  OFL105 at `self.stream.synchronize()`; and the *eager* forward is already wrong: the compute
  stream reads a prefetched group's weights without waiting for their copy (the synchronize
  orders the previous copies, not the ones issued after it).
- `variant="outside"`: block-level groups without a stream, on a model with a layer outside the
  ModuleList. That layer forms a group of its own that is never pinned: eager is exact, the
  capture fails with PyTorch's "Cannot copy ... unless the CPU tensor is pinned" at the copy's
  line (OFL106).
- `variant="leaf"`: one group per leaf module, no stream, everything pinned, and each onload
  waits for its copies on the compute stream: the correct baseline, which still copies inline.

`offlint probe --entry group-offload [--init-arg variant=outside]`.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import nn

from offlint.probing.entry import ProbedModel
from offlint.probing.examples._common import gpu_stack, input_maker, reference_of


class ModuleGroup:
    """Modules whose parameters move together between host memory and the GPU."""

    def __init__(
        self, modules: list[nn.Module], stream: torch.cuda.Stream | None, pin: bool
    ) -> None:
        self.modules = modules
        self.stream = stream
        self.params = [p for m in modules for p in m.parameters(recurse=True)]
        # The host copy of every parameter; offloading points `param.data` at it.
        self.host = []
        for param in self.params:
            host = param.data.to("cpu")
            self.host.append(host.pin_memory() if pin else host)
            param.data = self.host[-1]
        self.next_group: ModuleGroup | None = None
        self.onloaded = False

    def onload(self) -> None:
        if self.onloaded:
            return
        if self.stream is not None:
            # Make sure the previous prefetch finished before issuing new copies. (The two
            # hazards here are this example's point: the probe and the sanitizer must name them.)
            self.stream.synchronize()  # offlint: ignore[OFL105]
            with torch.cuda.stream(self.stream):  # offlint: ignore[OFL104]
                for param, host in zip(self.params, self.host, strict=True):
                    param.data = host.to("cuda", non_blocking=True)
        else:
            for param, host in zip(self.params, self.host, strict=True):
                param.data = host.to("cuda", non_blocking=True)
        self.onloaded = True

    def offload(self) -> None:
        for param, host in zip(self.params, self.host, strict=True):
            param.data = host
        self.onloaded = False


def apply_group_offloading(model: nn.Module, level: str, use_stream: bool) -> list[ModuleGroup]:
    """Split `model` into groups (one per block of its ModuleList, or one per leaf module) and
    hook them: a group onloads before its first module runs, offloads after its last, and with
    a stream the next group's copies start as soon as this group is onloaded."""
    stream = torch.cuda.Stream() if use_stream else None
    blocks = model.get_submodule("blocks")
    assert isinstance(blocks, nn.ModuleList)
    if level == "block":
        grouped = [[block] for block in blocks]
        inside = {id(m) for block in blocks for m in block.modules()}
        outside = [
            m
            for name, m in model.named_children()
            if name != "blocks" and id(m) not in inside and m is not None
        ]
        groups = [ModuleGroup(modules, stream, pin=True) for modules in grouped]
        if outside:
            # The layers outside the ModuleList: a group of their own, never pinned.
            groups.append(ModuleGroup(outside, None, pin=False))
    else:
        leaves = [m for m in model.modules() if not list(m.children()) and list(m.parameters())]
        groups = [ModuleGroup([leaf], stream, pin=True) for leaf in leaves]
    for group, following in itertools.pairwise(groups):
        group.next_group = following
    for group in groups:
        _hook(group)
    return groups


def _hook(group: ModuleGroup) -> None:
    first, last = group.modules[0], group.modules[-1]

    def before(module: nn.Module, args: Any) -> None:
        group.onload()
        if group.stream is not None and group.next_group is not None:
            group.next_group.onload()  # prefetch the next group on the copy stream

    def after(module: nn.Module, args: Any, output: Any) -> None:
        group.offload()

    first.register_forward_pre_hook(before)
    last.register_forward_hook(after)


def build(
    variant: str = "stream", hidden: int = 2048, blocks: int = 6, dtype: str = "bfloat16"
) -> ProbedModel:
    torch_dtype = getattr(torch, dtype)
    if variant not in ("stream", "outside", "leaf"):
        raise ValueError(f"variant must be stream, outside or leaf, not {variant!r}")
    model = gpu_stack(hidden, blocks, torch_dtype, outside_layer=variant == "outside")
    reference = reference_of(model)
    level = "leaf" if variant == "leaf" else "block"
    groups = apply_group_offloading(model, level, use_stream=variant == "stream")
    return ProbedModel(
        model=model,
        make_inputs=input_maker(hidden, torch_dtype),
        reference=reference,
        batch_sizes=(64, 32),
        expected_copies=sum(len(group.params) for group in groups),
        name=f"group offloading, {variant}",
    )
