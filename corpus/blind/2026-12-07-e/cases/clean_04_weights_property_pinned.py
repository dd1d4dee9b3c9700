# case: notebook cell: host-resident MLP weights behind a property that refreshes a static device slot from pinned memory; the cell captures and replays
import torch
from torch import nn


class PinnedHostMLP(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self._w_host = torch.randn(hidden, ffn, dtype=torch.float16).pin_memory()
        self._w_dev = torch.empty(hidden, ffn, dtype=torch.float16, device="cuda")

    @property
    def w(self):
        # same source and destination addresses at every replay
        self._w_dev.copy_(self._w_host, non_blocking=True)
        return self._w_dev

    def forward(self, x):
        return torch.relu(x @ self.w)


# %%
mlp = PinnedHostMLP(1024, 4096)
x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
mlp(x)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = mlp(x)
g.replay()
torch.cuda.synchronize()
y.float().mean().item()
