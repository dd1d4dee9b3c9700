"""Pre-forward hooks bound with functools.partial; side-stream work with and without a fork."""
import functools

import torch
from torch import nn


class PartialHookOffloader:
    def __init__(self, layers):
        self.layers = layers
        self.stream = torch.cuda.Stream()
        self.host = [torch.empty(8, pin_memory=True) for _ in layers]
        self.dev = [torch.empty(8, device="cuda") for _ in layers]
        for idx, layer in enumerate(layers):
            layer.register_forward_pre_hook(functools.partial(self._pre, idx))
            layer.register_forward_hook(functools.partial(self._post, idx))

    def _pre(self, idx, module, args):
        with torch.cuda.stream(self.stream):
            self.dev[idx].copy_(self.host[idx], non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.stream)
        return args

    def _post(self, idx, module, args, output):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.host[idx].copy_(self.dev[idx], non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.stream)
        return output
