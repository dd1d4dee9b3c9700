# case: offloaded embedding whose host sync lives in a staticmethod guarded by the capture state; PiecewiseRunner captures it with torch.cuda.graph
import torch
from torch import nn


class HostEmbedding(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.table_host = torch.randn(vocab, dim, dtype=torch.float16).pin_memory()
        self.rows_dev = torch.empty(256, dim, dtype=torch.float16, device="cuda")
        self.stream = torch.cuda.Stream()

    @staticmethod
    def _drain(stream):
        if torch.cuda.is_current_stream_capturing():
            return
        stream.synchronize()

    def forward(self, ids):
        self._drain(self.stream)
        return torch.nn.functional.embedding(ids, self.rows_dev)


class PiecewiseRunner:
    def __init__(self, module, max_tokens=256):
        self.module = module
        self.ids = torch.zeros(max_tokens, dtype=torch.long, device="cuda")
        self.graph = None
        self.out = None

    def capture(self):
        self.module(self.ids)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.module(self.ids)

    def __call__(self, ids):
        n = ids.numel()
        self.ids[:n].copy_(ids)
        self.graph.replay()
        return self.out[:n]
