"""`offlint fix`'s output for fixtures/golden/module_offloader_no_owner/in.py, installed as the
engine that module is written for installs it: one `_ModuleOffloader` per offloaded layer on one
shared side stream, the module's own `_hook_module_forward_for_offloader` on each offloaded
layer, the first `prefetch` copies primed once at start-up, and - where the fix added it (the
overlap strategy's end-of-forward join) - `join_offloader_copies(offloaders)` called at the end
of every model forward, inside whatever is captured, as the fix's note asks of the engine.

`build(fixed=PATH)`; the probe's `--init-arg` values are the other keyword arguments.
"""

from __future__ import annotations

from typing import Any

import torch
from fixed_entry_stack import load_fixed, probed, stack

from offlint.probing.entry import ProbedModel

OFFLOADER = "_ModuleOffloader"
HOOK = "_hook_module_forward_for_offloader"
# Added by the overlap strategy only; the inline output joins every copy where it is made.
JOIN = "join_offloader_copies"


def build(
    fixed: str,
    layers: int = 8,
    hidden: int = 1024,
    every: int = 2,
    prefetch: int = 1,
    dtype: str = "bfloat16",
) -> ProbedModel:
    module = load_fixed(fixed)
    built = stack(layers, hidden, every, dtype)
    alt_stream = torch.cuda.Stream()
    modules = [built.model.layers[index] for index in built.offloaded]
    offloaders = [getattr(module, OFFLOADER)(layer, alt_stream, ["weight"]) for layer in modules]
    for index, layer in enumerate(modules):
        getattr(module, HOOK)(index, layer, offloaders, prefetch)
    for offloader in offloaders:
        offloader.post_init()
    for offloader in offloaders[:prefetch]:
        offloader.start_onload()
    join = getattr(module, JOIN, None)
    if join is not None:

        def end_of_forward(model: torch.nn.Module, args: Any, output: Any) -> None:
            join(offloaders)

        built.model.register_forward_hook(end_of_forward)
    built.model._offloaders = offloaders  # kept alive with the model
    return probed(
        built,
        built.model,
        host_of_first=lambda: modules[0].get_parameter("weight"),
        name="module offloaders with the engine's hooks"
        + (", end-of-forward join" if join is not None else ""),
    )
