# case: host KV blocks are pinned by a callable submitted to a thread pool while the runner captures its graphs with capture_error_mode="thread_local"
from concurrent.futures import ThreadPoolExecutor

import torch


class PinBlocks:
    def __init__(self, num_blocks, block_numel, dtype):
        self.num_blocks = num_blocks
        self.block_numel = block_numel
        self.dtype = dtype

    def __call__(self):
        return torch.empty(self.num_blocks, self.block_numel, dtype=self.dtype, pin_memory=True)


class ThreadLocalRunner:
    def __init__(self, model, batch_sizes=(1, 4, 16)):
        self.model = model
        self.batch_sizes = batch_sizes
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.host_regions = {}
        self.graphs = {}

    def grow_host_kv(self, name, num_blocks):
        self.host_regions[name] = self.pool.submit(PinBlocks(num_blocks, 16 * 128 * 8, torch.bfloat16))

    def capture(self):
        self.grow_host_kv("swap0", 8192)
        for bs in self.batch_sizes:
            x = torch.zeros(bs, 4096, device="cuda")
            self.model(x)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, capture_error_mode="thread_local"):
                y = self.model(x)
            self.graphs[bs] = (g, x, y)
