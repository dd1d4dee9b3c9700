# case: CPU KV offload connector pins newly allocated host blocks on a thread pool (submitted with keyword arguments) while ModelRunner captures decode graphs in the default global mode
from concurrent.futures import ThreadPoolExecutor

import torch


def _allocate_pinned(num_blocks, block_shape, dtype, out):
    out["blocks"] = torch.empty((num_blocks, *block_shape), dtype=dtype, pin_memory=True)  # expect: OFL108
    return out


class HostKVPool:
    def __init__(self, block_shape, dtype=torch.bfloat16):
        self.block_shape = block_shape
        self.dtype = dtype
        self.pending = {}
        self.regions = []
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kv-pin")

    def grow_async(self, num_blocks):
        region = {}
        fut = self.executor.submit(_allocate_pinned, num_blocks=num_blocks,
                                   block_shape=self.block_shape, dtype=self.dtype, out=region)
        self.pending[id(region)] = fut
        return region

    def collect(self):
        for key, fut in list(self.pending.items()):
            if fut.done():
                self.regions.append(fut.result()["blocks"])
                del self.pending[key]


class ModelRunner:
    def __init__(self, model, kv_pool, batch_sizes=(1, 2, 4, 8, 16)):
        self.model = model
        self.kv_pool = kv_pool
        self.batch_sizes = batch_sizes
        self.graphs = {}

    def start(self):
        # background pinning begins while graphs are being captured
        self.kv_pool.grow_async(4096)
        self.capture_all()

    def capture_all(self):
        for bs in self.batch_sizes:
            x = torch.zeros(bs, 4096, device="cuda", dtype=torch.bfloat16)
            self.model(x)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = self.model(x)
            self.graphs[bs] = (g, x, y)
