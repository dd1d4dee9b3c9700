"""Background KV-buffer pinning while the same process captures graphs in the default (global) mode."""
import threading

import torch


class HostKVPool:
    def __init__(self, num_blocks, block_bytes):
        self.num_blocks = num_blocks
        self.block_bytes = block_bytes
        self.blocks = []
        self._worker = threading.Thread(target=self._grow, daemon=True)
        self._worker.start()

    def _grow(self):
        for _ in range(self.num_blocks):
            buf = torch.empty(self.block_bytes, dtype=torch.uint8)
            self.blocks.append(buf.pin_memory())


class GraphRunner:
    def __init__(self, model):
        self.model = model
        self.graphs = {}

    def capture_decode(self, batch_sizes, example):
        for bs in batch_sizes:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self.model(example[:bs])
            self.graphs[bs] = g
