"""A CPU-only offloader in the orchestrator shape, for dry runs of the probe's life cycle.

It touches no CUDA API except `torch.cuda.is_current_stream_capturing()` (faked in the tests):
offloaded weights move to the meta device and are handed back from a private copy, so the probe
sees them leave the model's device, as it sees a real offloader's move to pinned host memory.
"""

from __future__ import annotations

import torch
from torch.func import functional_call


class CpuOffloader:
    def __init__(self, group_size: int, num_in_group: int, prefetch_step: int):
        self.group_size = group_size
        self.num_in_group = num_in_group
        self.prefetch_step = prefetch_step
        self.kept: list[dict[str, torch.Tensor]] = []
        self.post_init_called = False

    def wrap_modules(self, all_modules, submodule_accessor=None,
                     whitelist_param_names_creator=None):
        all_modules = list(all_modules)
        for index, module in enumerate(all_modules):
            if index % self.group_size >= self.group_size - self.num_in_group:
                names = whitelist_param_names_creator(module)
                kept = {name: module.get_parameter(name).detach().clone() for name in names}
                for name in names:
                    meta = torch.empty_like(kept[name], device="meta")
                    setattr(module, name, torch.nn.Parameter(meta, requires_grad=False))
                self.kept.append(kept)
                _hook(module, kept)
        return all_modules

    def post_init(self):
        self.post_init_called = True


def _hook(module, kept):
    original_forward = module.forward

    def forward(*args, **kwargs):
        # A capture check, as capture-aware offloaders have (it is what torch.compile trips on).
        if torch.cuda.is_current_stream_capturing():
            pass
        module.forward = original_forward
        output = functional_call(module, kept, args=args, kwargs=kwargs)
        module.forward = forward
        return output

    module.forward = forward


class NotAnOffloader:
    def run(self):
        pass


def helper_function():
    return None
