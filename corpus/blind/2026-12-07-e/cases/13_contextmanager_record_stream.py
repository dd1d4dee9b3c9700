# case: a stream pool hands out side streams through a context manager; the KV spill path records the tensor's use inside the side-stream block; SpillRunner captures the attention step
import contextlib

import torch
from torch import nn


class StreamPool:
    def __init__(self, n=2):
        self.streams = [torch.cuda.Stream() for _ in range(n)]
        self.i = 0

    @contextlib.contextmanager
    def side(self):
        s = self.streams[self.i % len(self.streams)]
        self.i += 1
        cur = torch.cuda.current_stream()
        s.wait_stream(cur)
        with torch.cuda.stream(s):
            yield s
        cur.wait_stream(s)


class SpillingAttention(nn.Module):
    def __init__(self, pool, dim):
        super().__init__()
        self.pool = pool
        self.qkv = nn.Linear(dim, 3 * dim)
        self.spill = torch.empty(4096, dim, device="cuda")

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        with self.pool.side():
            packed = torch.cat([k, v], dim=0)
            packed.record_stream(torch.cuda.current_stream())  # expect: OFL204
            self.spill[: packed.shape[0]].copy_(packed)
        attn = torch.softmax(q @ k.transpose(0, 1), dim=-1)
        return attn @ v


class SpillRunner:
    def __init__(self, module, tokens, dim):
        self.module = module
        self.x = torch.zeros(tokens, dim, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def capture(self):
        self.module(self.x)
        torch.cuda.synchronize()
        with torch.cuda.graph(self.graph):
            self.y = self.module(self.x)

    def step(self, x):
        self.x.copy_(x)
        self.graph.replay()
        return self.y
