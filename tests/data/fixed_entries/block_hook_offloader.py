"""`offlint fix`'s output for fixtures/block_hook_offloader.py: its `BlockHookOffloader` given the
offloaded layers of the stack as its blocks (its constructor pins their weights, hooks each block
and prefetches the first), as the fixture's own `Transformer` hands it its blocks. The fixture's
`Transformer` is not used: its `nn.Linear` blocks would add a bias copy per block, and the
probe's stack keeps one weight per offloaded layer (one H2D copy each).

`build(fixed=PATH)`; the probe's `--init-arg` values are the other keyword arguments.
"""

from __future__ import annotations

from fixed_entry_stack import load_fixed, probed, stack
from torch import nn

from offlint.probing.entry import ProbedModel

OFFLOADER = "BlockHookOffloader"


def build(
    fixed: str, layers: int = 8, hidden: int = 1024, every: int = 2, dtype: str = "bfloat16"
) -> ProbedModel:
    module = load_fixed(fixed)
    built = stack(layers, hidden, every, dtype)
    blocks = nn.ModuleList(built.model.layers[index] for index in built.offloaded)
    offloader = getattr(module, OFFLOADER)(blocks, device=str(built.device))
    built.model._offloader = offloader  # kept alive with the model
    first = blocks[0].get_parameter("weight")
    return probed(
        built,
        built.model,
        host_of_first=lambda: offloader.cpu_params[first],
        name="per-block hook offloader",
        # (the constructor has already onloaded the first block: its parameter is on the GPU)
        host_tensors=list(offloader.cpu_params.values()),
    )
