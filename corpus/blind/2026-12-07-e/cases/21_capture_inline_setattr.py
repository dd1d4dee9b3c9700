# case: offloaded layers cache their device weights under per-layer attribute names (setattr/getattr); while capturing they copy inline and keep the capture-made buffer, which the next eager forward reuses; GraphDecodeRunner captures then also runs eager prefill
import torch
from torch import nn


class InlineOffloadedLinear(nn.Module):
    def __init__(self, idx, dim):
        super().__init__()
        self.idx = idx
        self.host = torch.randn(dim, dim, dtype=torch.float16).pin_memory()
        self.stream = torch.cuda.Stream()

    def _weight(self):
        key = f"_dev_w{self.idx}"
        if torch.cuda.is_current_stream_capturing():
            buf = torch.empty_like(self.host, device="cuda")
            buf.copy_(self.host, non_blocking=True)
            setattr(self, key, buf)  # expect: OFL201
            return buf
        cached = getattr(self, key, None)
        if cached is not None:
            return cached  # alt: OFL201
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            buf = self.host.to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.stream)
        buf.record_stream(torch.cuda.current_stream())
        return buf

    def forward(self, x):
        return x @ self._weight()


class GraphDecodeRunner:
    def __init__(self, layers, batch, dim):
        self.layers = layers
        self.x = torch.zeros(batch, dim, device="cuda", dtype=torch.float16)

    def _run(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def capture(self):
        self._run(self.x)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.y = self._run(self.x)

    def prefill(self, x):
        # eager, right after capture and before any replay
        return self._run(x)
