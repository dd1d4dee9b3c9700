"""SGLang's CPU-weight offloader as an engine installs it, probed through `--entry`: the model
is built, the offloader class wraps its layers (`wrap_modules`) and prefetches (`post_init`),
exactly as SGLang's model runner does, then the probe takes the model as a user's own.

`fixture` picks the offloader: `original` (SGLang before its CUDA-graph fix, the default),
`inline` (the merged fix), `inline_fixed` or `overlap` (fixtures/README.md). The probe should
find for `original`: the capture fails with 905 at the root, raised by
`self._load_event.wait()`, which the sanitizer names OFL101 with the line that recorded the
event (the post-init prefetch); for `inline`: capture and replays exact, the eager forward
after the capture wrong (the sanitizer: OFL201, an eager read of a tensor the capture made) and
5 copies per replay for 4 offloaded layers.

`offlint probe --entry sglang-offload [--init-arg fixture=inline]`.
"""

from __future__ import annotations

from typing import Any

import torch

from offlint.probing.bundled import fixtures_dir
from offlint.probing.entry import ProbedModel, import_user_module
from offlint.probing.model import build_stack, make_weights, random_input


def build(
    fixture: str = "original",
    layers: int = 16,
    hidden: int = 4096,
    every: int = 4,
    prefetch: int = 1,
    dtype: str = "bfloat16",
) -> ProbedModel:
    path = fixtures_dir() / f"sglang_offloader_{fixture}.py"
    module, _ = import_user_module(f"{path}:Offloader", "fixture")
    torch_dtype = getattr(torch, dtype)
    device = torch.device("cuda", torch.cuda.current_device())
    generator = torch.Generator(device=device)
    generator.manual_seed(0)
    weights = make_weights(layers, hidden, torch_dtype, device, generator)
    reference = build_stack(weights).to(device)
    model = build_stack(weights).to(device)
    offloader = module.Offloader(group_size=every, num_in_group=1, prefetch_step=prefetch)
    model.layers = torch.nn.ModuleList(
        offloader.wrap_modules(
            list(model.layers),
            submodule_accessor=lambda layer: layer,
            whitelist_param_names_creator=lambda layer: ["weight"],
        )
    )
    offloader.post_init()
    first = every - 1

    def make_inputs(batch_size: int) -> torch.Tensor:
        return random_input(batch_size, hidden, torch_dtype, device, generator)

    def update_weights() -> Any:
        new = make_weights(1, hidden, torch_dtype, device, generator)[0]
        host = model.get_submodule(f"layers.{first}").get_parameter("weight")
        host.copy_(new.cpu())  # the host weight, in place
        reference.get_submodule(f"layers.{first}").get_parameter("weight").copy_(new)
        return f"layer {first}'s host weight"

    model._offloader = offloader  # keep it alive with the model
    return ProbedModel(
        model=model,
        make_inputs=make_inputs,
        reference=reference,
        batch_sizes=(4096, 2048),
        update_weights=update_weights,
        expected_copies=len(range(first, layers, every)),
        name=f"SGLang-shaped offloader, {fixture}",
    )
