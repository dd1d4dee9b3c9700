"""accelerate's own `cpu_offload` (the real library, imported: this example needs accelerate)
on a stack of Linear + GELU blocks, as shared/GROUND-TRUTH.md §3 measured it. The probe should
find: eager exact; the capture fails with PyTorch's "Cannot copy between CPU and CUDA tensors
during CUDA graph capture unless the CPU tensor is pinned", from the hook's `pre_forward`
(accelerate keeps the offloaded weights in pageable memory); the sanitizer names OFL106 at
that copy. Without accelerate, build() fails and the probe says so in one line (exit 2).

`offlint probe --entry accelerate-offload`.
"""

from __future__ import annotations

import torch

from offlint.probing.entry import ProbedModel
from offlint.probing.examples._common import gpu_stack, input_maker, reference_of


def build(hidden: int = 2048, blocks: int = 6, dtype: str = "bfloat16") -> ProbedModel:
    from accelerate import cpu_offload  # the real library, or a one-line setup error

    torch_dtype = getattr(torch, dtype)
    model = gpu_stack(hidden, blocks, torch_dtype)
    reference = reference_of(model)
    cpu_offload(model, execution_device=torch.device("cuda", torch.cuda.current_device()))
    return ProbedModel(
        model=model,
        make_inputs=input_maker(hidden, torch_dtype),
        reference=reference,
        batch_sizes=(64, 32),
        name="accelerate cpu_offload",
    )
