"""Hooks defined inside the constructor (closure, lambda, functools.partial) run on every forward."""
import functools

import torch
from torch import nn


def _sync_after(stream, module, args, output):
    stream.synchronize()
    return output


class HookedOffloader:
    def __init__(self, model: nn.Module, host_weights):
        self.stream = torch.cuda.Stream()
        self.host = {n: w.pin_memory() for n, w in host_weights.items()}
        self.dev = {n: torch.empty_like(w, device="cuda") for n, w in host_weights.items()}

        def pre_hook(module, args):
            name = module._offload_name
            with torch.cuda.stream(self.stream):
                self.dev[name].copy_(self.host[name], non_blocking=True)
            torch.cuda.current_stream().wait_stream(self.stream)

        for name, mod in model.named_children():
            mod._offload_name = name
            mod.register_forward_pre_hook(pre_hook)
            mod.register_forward_hook(functools.partial(_sync_after, self.stream))
        model.register_forward_hook(lambda m, a, out: out.cpu())
        torch.cuda.synchronize()
