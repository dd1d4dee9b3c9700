# case: SGLang breakable (segmented) capture: a per-layer-engram lookup runs in eager breaks; the first break starts the host->device gather on a side stream and reads a count back, a later break of the same forward joins it
import torch
from torch import nn

from sglang.srt.model_executor.runner_backend_utils.breakable_cuda_graph import eager_on_graph


class HostEngramTable(nn.Module):
    def __init__(self, rows, dim):
        super().__init__()
        self.host = torch.randn(rows, dim, dtype=torch.bfloat16).pin_memory()
        self.staging = torch.empty(4096, dim, dtype=torch.bfloat16).pin_memory()
        self.dev = torch.empty(4096, dim, dtype=torch.bfloat16, device="cuda")
        self.side = torch.cuda.Stream()
        self.n = 0

    @eager_on_graph(True)
    def start_gather(self, ids):
        # eager: host syncs are legal between segments
        host_ids = ids.cpu()
        self.n = int(host_ids.numel())
        torch.index_select(self.host, 0, host_ids, out=self.staging[: self.n])
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.dev[: self.n].copy_(self.staging[: self.n], non_blocking=True)

    @eager_on_graph(True)
    def finish_gather(self):
        torch.cuda.current_stream().wait_stream(self.side)


class EngramDecoderLayer(nn.Module):
    def __init__(self, dim, table):
        super().__init__()
        self.table = table
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.norm = nn.LayerNorm(dim)

    def forward(self, hidden, ids):
        self.table.start_gather(ids)
        h = self.mlp(self.norm(hidden))
        self.table.finish_gather()
        return hidden + h + self.table.dev[: hidden.shape[0]]
