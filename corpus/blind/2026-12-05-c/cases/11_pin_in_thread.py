"""KV offload buffers pinned on a background thread while the engine captures graphs (global mode)."""
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

_pool = ThreadPoolExecutor(max_workers=1)


def _alloc_host_blocks(n, nbytes, out):
    for _ in range(n):
        out.append(torch.empty(nbytes, dtype=torch.uint8, pin_memory=True))


def _pin_one(t):
    return t.pin_memory()


class KVHostPool:
    def __init__(self, n, nbytes):
        self.blocks = []
        self.t = threading.Thread(target=_alloc_host_blocks, args=(n, nbytes, self.blocks), daemon=True)
        self.t.start()

    def add(self, t):
        return _pool.submit(_pin_one, t)


def capture_decode(model, x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = model(x)
    return g, y
