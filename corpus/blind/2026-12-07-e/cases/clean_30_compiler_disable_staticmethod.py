# case: the capture test lives in a staticmethod excluded from tracing with torch.compiler.disable; the offloaded layer is compiled with torch.compile
import torch
from torch import nn


class DisabledCheckLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.host = torch.randn(dim, dim).pin_memory()
        self.dev = torch.empty(dim, dim, device="cuda")
        self.copy_stream = torch.cuda.Stream()

    @staticmethod
    @torch.compiler.disable
    def _refresh(host, dev, copy_stream):
        if torch.cuda.is_current_stream_capturing():
            dev.copy_(host, non_blocking=True)
            return
        cur = torch.cuda.current_stream()
        copy_stream.wait_stream(cur)
        with torch.cuda.stream(copy_stream):
            dev.copy_(host, non_blocking=True)
        cur.wait_stream(copy_stream)

    def forward(self, x):
        self._refresh(self.host, self.dev, self.copy_stream)
        return torch.tanh(x @ self.dev)


layer = torch.compile(DisabledCheckLayer(512))
