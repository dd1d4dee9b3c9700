"""KV blocks pinned on a background thread while the engine captures graphs in global mode."""
import queue
import threading

import torch


class HostKVPool:
    def __init__(self, n_blocks, block_bytes):
        self.free = queue.Queue()
        self.block_bytes = block_bytes
        self.worker = threading.Thread(target=self._grow, args=(n_blocks,), daemon=True)
        self.worker.start()

    def _grow(self, n):
        for _ in range(n):
            buf = torch.empty(self.block_bytes, dtype=torch.uint8, pin_memory=True)
            self.free.put(buf)


def capture_decode(model, x):
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = model(x)
    return g, y
