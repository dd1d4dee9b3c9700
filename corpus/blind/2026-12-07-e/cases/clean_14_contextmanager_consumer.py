# case: the same context manager, but the consumer stream is taken before entering the side stream and recorded explicitly; capture_spill() captures with torch.cuda.graph
import contextlib

import torch


class Streams:
    def __init__(self):
        self.copy = torch.cuda.Stream()


@contextlib.contextmanager
def on_side(streams):
    cur = torch.cuda.current_stream()
    streams.copy.wait_stream(cur)
    with torch.cuda.stream(streams.copy):
        yield cur
    cur.wait_stream(streams.copy)


def spill(streams, k, v, out):
    with on_side(streams) as consumer:
        packed = torch.cat([k, v], dim=0)
        packed.record_stream(consumer)
        out[: packed.shape[0]].copy_(packed)
    return out


def capture_spill(streams, k, v, out):
    spill(streams, k, v, out)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        spill(streams, k, v, out)
    return g
