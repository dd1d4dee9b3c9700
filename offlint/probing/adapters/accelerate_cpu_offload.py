"""accelerate's real `cpu_offload(model, execution_device=cuda)` on shared/GROUND-TRUTH.md §3's
toy model: 6 blocks of Linear(2048) + GELU in a ModuleList, bf16, batch 64. Variants:

- `blocks`: every layer in the ModuleList;
- `outside`: a Linear outside the ModuleList too (accelerate hooks every module alike, so the
  outcome should not change).

Measured on an H200 with accelerate 1.15.0 (benchmarks/results/adapters-h200-2026-12-03.json):
eager exact; capture fails with the pinned-copy error at `set_module_tensor_to_device`
(`value.to(device, …)`), from `AlignDevicesHook.pre_forward` (OFL106), in both variants.

`offlint probe --entry offlint.probing.adapters.accelerate_cpu_offload:build`, or
`python -m offlint.probing.adapters.accelerate_cpu_offload [--variant NAME …] [-o FILE.json]`
(offlint/probing/adapters/__init__.py). Without accelerate: one line, exit 2.
"""

from __future__ import annotations

import sys
from typing import Any

from offlint.probing.adapters._library import import_library
from offlint.probing.adapters._lifecycle import Adapter, main

VARIANTS = {
    "blocks": "cpu_offload(execution_device=cuda), every layer in the ModuleList",
    "outside": "cpu_offload(execution_device=cuda), a layer outside the ModuleList",
}


def build(
    variant: str = "blocks", hidden: int = 2048, blocks: int = 6, dtype: str = "bfloat16"
) -> Any:
    """The toy model with accelerate's `cpu_offload` installed (`--entry` protocol)."""
    accelerate = import_library("accelerate", "accelerate")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, not {variant!r}")
    import torch

    from offlint.probing.entry import ProbedModel
    from offlint.probing.examples._common import gpu_stack, input_maker, reference_of

    torch_dtype = getattr(torch, dtype)
    model = gpu_stack(hidden, blocks, torch_dtype, outside_layer=variant == "outside")
    reference = reference_of(model)
    accelerate.cpu_offload(
        model, execution_device=torch.device("cuda", torch.cuda.current_device())
    )
    return ProbedModel(
        model=model,
        make_inputs=input_maker(hidden, torch_dtype),
        reference=reference,
        batch_sizes=(64, 32),
        name=f"accelerate cpu_offload ({variant})",
    )


ADAPTER = Adapter(
    module="offlint.probing.adapters.accelerate_cpu_offload",
    distribution="accelerate",
    library="accelerate",
    variants=VARIANTS,
    build=build,
)

if __name__ == "__main__":
    sys.exit(main(ADAPTER))
