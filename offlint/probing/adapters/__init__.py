"""Adapters: the REAL offloading libraries (diffusers group offloading, accelerate's
`cpu_offload`) installed on shared/GROUND-TRUTH.md §3's toy model, and SGLang's real
`OffloaderV2` on the probe's synthetic model, for `offlint probe --entry` and for a graph-runner
life cycle of their own under the capture sanitizer.

Each module (`diffusers_group_offload`, `accelerate_cpu_offload`, `sglang_offloader_v2`) has

- `build(variant=…, hidden=…, …)`: the `--entry` protocol of offlint/probing/entry.py
  (`offlint probe --entry offlint.probing.adapters.diffusers_group_offload:build
  --init-arg variant=block-stream`, or by the short name of `ENTRY_NAMES` below:
  `--entry diffusers-group-offload`); where the library cannot be imported it raises
  `LibraryMissing`, which the probe reports in one line (exit 2; for sglang the line names the
  missing module and the sglang module that imported it);
- `python -m offlint.probing.adapters.<module> [--variant NAME …] [--csan] [-o FILE.json]`: each
  variant in a process of its own (warm-up, eager forwards against a GPU copy, one capture with
  `torch.cuda.graph` under `capture_sanitizer(mode="record")`), reporting the root error and the
  innermost line *inside the library* from the exception and from each sanitizer violation;
  `--csan` adds a run of one eager forward under PyTorch's CUDA sanitizer, which names both
  sides of an unordered cross-stream access (the wrong eager result has no CUDA error to walk).
  Exit 2 in one line where the library or a CUDA device is missing.

The adapters are not the bundled look-alikes of offlint/probing/examples/: nothing here
re-implements a library, and nothing runs at import.
"""

# `offlint probe --entry NAME`: the adapters by a short name (offlint/probing/entry.py)
ENTRY_NAMES = {
    "diffusers-group-offload": "offlint.probing.adapters.diffusers_group_offload:build",
    "accelerate-cpu-offload": "offlint.probing.adapters.accelerate_cpu_offload:build",
    "sglang-offloader-v2": "offlint.probing.adapters.sglang_offloader_v2:build",
}
