"""diffusers' real group offloading (`diffusers.hooks.apply_group_offloading`, what a model's
`enable_group_offload` calls) on shared/GROUND-TRUTH.md §3's toy model: 6 blocks of
Linear(2048) + GELU in a ModuleList, bf16, batch 64. Variants:

- `outside`: block level, one block per group, no stream, a Linear outside the ModuleList;
- `outside-stream`: the same with `use_stream=True, record_stream=True` (the outside layer's
  group has no stream and is never pinned either way);
- `leaf-stream`: leaf level, `use_stream=True`, every layer in the ModuleList;
- `block-stream`: block level, `use_stream=True`, every layer in the ModuleList;
- `leaf`: leaf level without a stream (the control: pageable, so still not capturable).

Measured on an H200 with diffusers 0.42.1 (benchmarks/results/adapters-h200-2026-12-03.json):
`outside`, `outside-stream` and `leaf` fail capture with the pinned-copy error at
`_transfer_tensor_to_device` (OFL106); `leaf-stream` and `block-stream` with 900 at
`self.stream.synchronize()` in `_onload_from_memory` (OFL105); `block-stream`'s eager forward is
wrong (rel. err 1.2-1.35), the race named by `--csan` (the copy in `_transfer_tensor_to_device`
on the copy stream, read by `addmm` on the compute stream).

`offlint probe --entry offlint.probing.adapters.diffusers_group_offload:build
--init-arg variant=block-stream`, or `python -m offlint.probing.adapters.diffusers_group_offload
[--variant NAME …] [--csan] [-o FILE.json]` (offlint/probing/adapters/__init__.py). Without
diffusers: one line, exit 2.
"""

from __future__ import annotations

import sys
from typing import Any

from offlint.probing.adapters._library import import_library
from offlint.probing.adapters._lifecycle import Adapter, main

# name → (offload_type, use_stream, record_stream, a layer outside the ModuleList)
SETUPS: dict[str, tuple[str, bool, bool, bool]] = {
    "outside": ("block_level", False, False, True),
    "outside-stream": ("block_level", True, True, True),
    "leaf-stream": ("leaf_level", True, False, False),
    "block-stream": ("block_level", True, False, False),
    "leaf": ("leaf_level", False, False, False),
}


def describe(variant: str) -> str:
    level, stream, record, outside = SETUPS[variant]
    where = "a layer outside the ModuleList" if outside else "every layer in the ModuleList"
    return f"{level}, use_stream={stream}, record_stream={record}, {where}"


def build(
    variant: str = "block-stream", hidden: int = 2048, blocks: int = 6, dtype: str = "bfloat16"
) -> Any:
    """The toy model with diffusers' group offloading installed (`--entry` protocol)."""
    hooks = import_library("diffusers.hooks", "diffusers")
    if variant not in SETUPS:
        raise ValueError(f"variant must be one of {', '.join(SETUPS)}, not {variant!r}")
    import torch

    from offlint.probing.entry import ProbedModel
    from offlint.probing.examples._common import gpu_stack, input_maker, reference_of

    level, use_stream, record_stream, outside = SETUPS[variant]
    torch_dtype = getattr(torch, dtype)
    model = gpu_stack(hidden, blocks, torch_dtype, outside_layer=outside)
    reference = reference_of(model)
    device = torch.device("cuda", torch.cuda.current_device())
    hooks.apply_group_offloading(
        model,
        onload_device=device,
        offload_device=torch.device("cpu"),
        offload_type=level,
        num_blocks_per_group=1 if level == "block_level" else None,
        use_stream=use_stream,
        record_stream=record_stream,
    )
    return ProbedModel(
        model=model,
        make_inputs=input_maker(hidden, torch_dtype),
        reference=reference,
        batch_sizes=(64, 32),
        name=f"diffusers group offloading ({variant})",
    )


ADAPTER = Adapter(
    module="offlint.probing.adapters.diffusers_group_offload",
    distribution="diffusers",
    library="diffusers",
    variants={name: describe(name) for name in SETUPS},
    build=build,
)

if __name__ == "__main__":
    sys.exit(main(ADAPTER))
