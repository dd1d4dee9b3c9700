# case: an offloaded decoder layer whose forward is decorated with torch.compile(fullgraph=True) asks the capture state to pick its copy path
import torch
from torch import nn


class CompiledOffloadLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.host_w = torch.randn(dim, dim, dtype=torch.bfloat16).pin_memory()
        self.slot = torch.empty(dim, dim, dtype=torch.bfloat16, device="cuda")
        self.copy_stream = torch.cuda.Stream()

    def _load(self):
        if torch.cuda.is_current_stream_capturing():  # expect: OFL301
            self.slot.copy_(self.host_w, non_blocking=True)
            return
        cur = torch.cuda.current_stream()
        self.copy_stream.wait_stream(cur)
        with torch.cuda.stream(self.copy_stream):
            self.slot.copy_(self.host_w, non_blocking=True)
        cur.wait_stream(self.copy_stream)

    @torch.compile(fullgraph=True)
    def forward(self, x):
        self._load()
        return torch.nn.functional.silu(x @ self.slot)
