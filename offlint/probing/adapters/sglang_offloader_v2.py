"""SGLang's real `OffloaderV2` (`sglang.srt.utils.offloader`, from an installed sglang), installed
on the probe's synthetic model (offlint/probing/model.py: `layers` layers `tanh(x @ W)`, bf16) the
way SGLang's model runner installs it. Nothing of sglang is re-implemented or stood in for: the
module is imported with whatever it imports; where that fails, one line names the missing module
and the sglang module that needed it (exit 2).

What SGLang does, and what this adapter does in its place:

- `ModelRunner` calls `set_offloader(create_offloader())`; `create_offloader` reads
  `--offload-group-size/-num-in-group/-prefetch-step/-mode` from the published server args
  (`get_exec().offload`). Publishing (`runtime_context.publish`) resolves the whole `ServerArgs`
  record, which imports the model configs and with them transformers: nothing the class needs.
  So the adapter builds `OffloaderV2(group_size, num_in_group, prefetch_step, mode)` with the
  values `create_offloader` would pass and installs it with SGLang's own `set_offloader`.
- `OffloaderV2.__init__` reads `get_parallel().dp_rank` and `.num_dp_ranks`: set with SGLang's
  own setter `get_parallel().override_permanently(dp_rank=None, num_dp_ranks=1)`, the values of a
  single-GPU server without a data-parallel controller (documented as working without published
  configuration). It also reads `SGLANG_RUN_ID`, which SGLang's engine sets at launch
  (`entrypoints/engine.py`); set here the same way when the environment has none.
- `wrap_modules` takes its copy stream from `runtime_context.get_stream("offload")`, which
  creates it as SGLang does (a CUDA stream, nothing published).
- The models call `get_offloader().wrap_modules(<generator building the layers>,
  submodule_accessor=…, whitelist_param_names_creator=…)` inside `make_layers`; `make_layers`
  itself imports SGLang's layer machinery (attention, kernels: tvm_ffi…), so the adapter makes
  the same call directly, then loads the weights into the wrapped layers (the loader writes the
  offloaded ones into their pinned host copies) and calls `post_init()`, as
  `ModelRunner.load_model` does after loading.

Variants: `cpu` (mode `cpu`, prefetch 1 offloaded layer ahead) and `cpu-prefetch-2`; by default
16 layers of 4096, the last of every 4 offloaded (`group_size=4, num_in_group=1`), as the bundled
`sglang-offload` example (the repo's fixtures of the same class) has them.

Measured on an H200 with sglang 0.5.23 (benchmarks/results/sglang-v2-h200-2026-12-03-import-check
.json): the import chain loads 92 sglang modules and none of sglang's compiled extensions; both
variants compute exactly in eager mode, capture, and replay exactly (the shared life cycle below).

`offlint probe --entry sglang-offloader-v2 [--init-arg variant=cpu-prefetch-2]` (the probe's
life cycle: captures of two batch sizes, replays, an eager forward after capture, a weight
update), or `python -m offlint.probing.adapters.sglang_offloader_v2 [--variant NAME …]
[-o FILE.json]` (offlint/probing/adapters/__init__.py). benchmarks/sglang_v2_gpu.sh runs both on
a GPU machine where sglang's wheel is installed without its dependencies.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from types import ModuleType, TracebackType
from typing import Any

from offlint.probing.adapters._library import LibraryMissing
from offlint.probing.adapters._lifecycle import Adapter
from offlint.probing.adapters._lifecycle import main as lifecycle_main

OFFLOADER_MODULE = "sglang.srt.utils.offloader"
RUNTIME_CONTEXT_MODULE = "sglang.srt.runtime_context"

# name → (mode, prefetch_step)
SETUPS: dict[str, tuple[str, int]] = {
    "cpu": ("cpu", 1),
    "cpu-prefetch-2": ("cpu", 2),
}


def describe(variant: str) -> str:
    mode, prefetch = SETUPS[variant]
    return (
        f"OffloaderV2(mode={mode!r}, group_size=4, num_in_group=1, prefetch_step={prefetch}): "
        "the last of every 4 layers in pinned host memory"
    )


def _importer(traceback: TracebackType | None) -> str:
    """The module whose code ran the failing import: the innermost frame that is not
    importlib's own machinery."""
    name = "?"
    while traceback is not None:
        frame = traceback.tb_frame
        filename = frame.f_code.co_filename
        if not filename.startswith("<frozen importlib") and not (
            filename.endswith(os.path.join("importlib", "__init__.py"))
        ):
            spec = frame.f_globals.get("__spec__")  # `python -m` runs a module as __main__
            name = str(spec.name if spec else frame.f_globals.get("__name__", filename))
        traceback = traceback.tb_next
    return name


def not_importable_line(exc: BaseException) -> str:
    """The one line that says why `sglang.srt.utils.offloader` cannot be imported here."""
    importer = _importer(exc.__traceback__)
    prefix = f"{OFFLOADER_MODULE} is not importable here"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return f"{prefix}: {exc.name} is missing (needed by {importer})"
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{prefix}: {type(exc).__name__}: {first} (in {importer})"


def import_offloader() -> ModuleType:
    """SGLang's real offloader module, or `LibraryMissing` with one line naming the module that
    is missing and the one that imported it."""
    try:
        return importlib.import_module(OFFLOADER_MODULE)
    except Exception as exc:  # a missing module, or sglang's own error at import
        raise LibraryMissing(not_importable_line(exc)) from None


def _configure_runtime() -> Any:
    """What `OffloaderV2` reads from SGLang's process state, set through SGLang's own setters
    (module docstring); returns the runtime-context module."""
    runtime = importlib.import_module(RUNTIME_CONTEXT_MODULE)
    runtime.get_parallel().override_permanently(dp_rank=None, num_dp_ranks=1)
    os.environ.setdefault("SGLANG_RUN_ID", f"sglang-run-{time.time()}-offlint-probe")
    return runtime


def build(
    variant: str = "cpu",
    layers: int = 16,
    hidden: int = 4096,
    group_size: int = 4,
    num_in_group: int = 1,
    dtype: str = "bfloat16",
) -> Any:
    """The synthetic model with SGLang's real `OffloaderV2` installed (`--entry` protocol)."""
    offloader_module = import_offloader()
    if variant not in SETUPS:
        raise ValueError(f"variant must be one of {', '.join(SETUPS)}, not {variant!r}")
    import torch

    from offlint.probing.entry import ProbedModel
    from offlint.probing.model import LayerStack, TanhLayer, build_stack, make_weights, random_input

    mode, prefetch_step = SETUPS[variant]
    _configure_runtime()
    torch_dtype = getattr(torch, dtype)
    device = torch.device("cuda", torch.cuda.current_device())
    generator = torch.Generator(device=device)
    generator.manual_seed(0)
    weights = make_weights(layers, hidden, torch_dtype, device, generator)
    reference = build_stack(weights).to(device)

    offloader = offloader_module.OffloaderV2(
        group_size=group_size, num_in_group=num_in_group, prefetch_step=prefetch_step, mode=mode
    )
    offloader_module.set_offloader(offloader)
    wrapped = offloader_module.get_offloader().wrap_modules(
        (TanhLayer(torch.empty_like(weight)) for weight in weights),
        submodule_accessor=lambda layer: layer,
        whitelist_param_names_creator=lambda module: ["weight"],
    )
    model = LayerStack(wrapped)
    with torch.no_grad():  # the weight loader: offloaded weights land in their host copies
        for layer, weight in zip(model.layers, weights, strict=True):
            layer.get_parameter("weight").data.copy_(weight)
    torch.cuda.synchronize()
    offloader_module.get_offloader().post_init()

    offloaded = [i for i in range(layers) if i % group_size >= group_size - num_in_group]

    def make_inputs(batch_size: int) -> torch.Tensor:
        return random_input(batch_size, hidden, torch_dtype, device, generator)

    def update_weights() -> Any:
        first = offloaded[0]
        new = make_weights(1, hidden, torch_dtype, device, generator)[0]
        with torch.no_grad():  # in place, as a weight loader writes a loaded tensor
            model.get_submodule(f"layers.{first}").get_parameter("weight").copy_(new)
            reference.get_submodule(f"layers.{first}").get_parameter("weight").copy_(new)
        torch.cuda.synchronize()
        return f"layer {first}'s host weight"

    model._offloader = offloader  # keep it alive with the model
    return ProbedModel(
        model=model,
        make_inputs=make_inputs,
        reference=reference,
        batch_sizes=(4096, 2048),
        update_weights=update_weights,
        expected_copies=len(offloaded),
        name=f"SGLang's OffloaderV2 ({variant})",
    )


ADAPTER = Adapter(
    module="offlint.probing.adapters.sglang_offloader_v2",
    distribution="sglang",
    library="sglang",
    variants={name: describe(name) for name in SETUPS},
    build=build,
)


def main(argv: list[str] | None = None) -> int:
    """`python -m …`: the one-line import check first (the shared life cycle's own check would
    name only the top package), then the shared life cycle."""
    try:
        import_offloader()
    except LibraryMissing as missing:
        print(f"{ADAPTER.module}: {missing}")
        return 2
    return lifecycle_main(ADAPTER, argv)


if __name__ == "__main__":
    sys.exit(main())
