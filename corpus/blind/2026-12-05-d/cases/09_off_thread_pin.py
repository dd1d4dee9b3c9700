import threading

import torch


class KVSpill:
    def __init__(self, blocks):
        self.blocks = blocks
        self.host = []
        self.worker = threading.Thread(target=self._pin_worker, daemon=True)
        self.worker.start()

    def _pin_worker(self):
        for b in self.blocks:
            self.host.append(torch.empty(b.shape, dtype=b.dtype, pin_memory=True))

    def pin_inline(self):
        return [torch.empty(b.shape, dtype=b.dtype, pin_memory=True) for b in self.blocks]


def capture_decode(model, x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = model(x)
    return g, y
