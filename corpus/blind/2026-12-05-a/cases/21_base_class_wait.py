"""Base class provides the wait; subclass forward uses it; first prefetch issued in post_init."""
import torch
from torch import nn


class OffloaderBase:
    def __init__(self):
        self._alt_stream = torch.cuda.Stream()
        self._load_event = None

    def wait_loaded(self):
        if self._load_event is not None:
            self._load_event.wait()
            self._load_event = None

    def start_load(self, dst, src):
        self._alt_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self._alt_stream):
            dst.copy_(src, non_blocking=True)
        self._load_event = torch.cuda.Event()
        self._load_event.record(self._alt_stream)


class LayerOffloader(OffloaderBase, nn.Module):
    def __init__(self, layer: nn.Linear):
        nn.Module.__init__(self)
        OffloaderBase.__init__(self)
        self.layer = layer
        self.host_w = layer.weight.detach().cpu().pin_memory()
        self.dev_w = torch.empty_like(layer.weight)

    def post_init(self):
        self.start_load(self.dev_w, self.host_w)
        torch.cuda.synchronize()
        self.warm = self.dev_w.float().norm().item()

    def forward(self, x):
        self.wait_loaded()
        out = torch.nn.functional.linear(x, self.dev_w, self.layer.bias)
        self.start_load(self.dev_w, self.host_w)
        return out
