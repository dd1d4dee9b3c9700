# case: KV blocks swapped in on a per-device copy stream exposed through a descriptor; the step is captured with CUDAGraph.capture_begin()/capture_end()
import torch
from torch import nn

_DEVICE_STREAMS = {}


class PerDeviceStream:
    """Class attribute that resolves to one copy stream per device of the instance."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        key = (self.name, obj.device.index)
        if key not in _DEVICE_STREAMS:
            _DEVICE_STREAMS[key] = torch.cuda.Stream(device=obj.device)
        return _DEVICE_STREAMS[key]


class SwappedKVCache(nn.Module):
    swap_stream = PerDeviceStream()

    def __init__(self, num_blocks, block_bytes, device="cuda:0"):
        super().__init__()
        self.device = torch.device(device)
        self.host_blocks = torch.empty(num_blocks, block_bytes, dtype=torch.uint8, pin_memory=True)
        self.dev_blocks = torch.empty(num_blocks, block_bytes, dtype=torch.uint8, device=self.device)
        self.swap_in_ids = torch.zeros(16, dtype=torch.long, device=self.device)

    def forward(self, q):
        with torch.cuda.stream(self.swap_stream):  # expect: OFL104
            self.dev_blocks[:16].copy_(self.host_blocks[:16], non_blocking=True)
        return q + self.dev_blocks[:16].float().sum()  # allow: OFL205


def capture_step(cache, q):
    cache(q)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        graph.capture_begin()
        out = cache(q)
        graph.capture_end()
    torch.cuda.current_stream().wait_stream(stream)
    return graph, out
