# case: a script that offloads an MLP's weights to host memory behind a property and captures one decode step at module level
import torch
from torch import nn


class HostMLP(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        # kept on the host between calls; never pinned
        self._w_in_host = torch.randn(hidden, ffn, dtype=torch.float16)
        self._w_out_host = torch.randn(ffn, hidden, dtype=torch.float16)

    @property
    def w_in(self):
        return self._w_in_host.to("cuda", non_blocking=True)  # expect: OFL106

    @property
    def w_out(self):
        return self._w_out_host.cuda(non_blocking=True)  # expect: OFL106

    def forward(self, x):
        return torch.relu(x @ self.w_in) @ self.w_out


mlp = HostMLP(2048, 8192)
static_in = torch.randn(16, 2048, device="cuda", dtype=torch.float16)

for _ in range(3):
    mlp(static_in)
torch.cuda.synchronize()

graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_out = mlp(static_in)

for step in range(100):
    static_in.normal_()
    graph.replay()
print(static_out.float().norm().item())
