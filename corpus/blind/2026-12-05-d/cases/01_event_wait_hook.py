import torch
from torch import nn


class PrefetchOffloader:
    """Layer offloader: copies the next layer on a side stream, waits in a pre-hook."""

    def __init__(self, layers, cpu_weights):
        self.layers = layers
        self.cpu_weights = cpu_weights  # pinned host tensors
        self.copy_stream = torch.cuda.Stream()
        self.ready = [torch.cuda.Event() for _ in layers]
        self.gpu_bufs = [torch.empty_like(w, device="cuda") for w in cpu_weights]

        def pre_hook(module, args, idx=None):
            i = module._offload_idx
            self.ready[i].wait()
            self.prefetch(i + 1)

        for i, layer in enumerate(layers):
            layer._offload_idx = i
            layer.register_forward_pre_hook(pre_hook)

    def prefetch(self, i):
        if i >= len(self.layers):
            return
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            self.gpu_bufs[i].copy_(self.cpu_weights[i], non_blocking=True)
            self.ready[i].record()


class ExternalEventOffloader:
    """Same shape, but the events are external: their waits are graph nodes (legal)."""

    def __init__(self, layers, cpu_weights):
        self.layers = layers
        self.cpu_weights = cpu_weights
        self.copy_stream = torch.cuda.Stream()
        self.ready = [torch.cuda.Event(external=True) for _ in layers]
        for i, layer in enumerate(layers):
            layer._offload_idx = i
            layer.register_forward_pre_hook(self._pre_hook)

    def _pre_hook(self, module, args):
        i = module._offload_idx
        torch.cuda.current_stream().wait_event(self.ready[i])
