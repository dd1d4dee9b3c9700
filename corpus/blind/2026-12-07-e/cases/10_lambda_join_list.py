# case: notebook cell: a data loader stages the next batch's features on a side stream kept in a module list; the model joins it through a lambda; the cell captures the model with torch.cuda.graph
import torch
from torch import nn

_streams = []


def loader_stream():
    if not _streams:
        _streams.append(torch.cuda.Stream())
    return _streams[0]


def stage_next(host_batch, dev_batch):
    with torch.cuda.stream(loader_stream()):
        dev_batch.copy_(host_batch, non_blocking=True)


class FeatureModel(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self._join_loader = lambda: torch.cuda.current_stream().wait_stream(_streams[0])  # expect: OFL102

    def forward(self, feats):
        self._join_loader()
        return self.proj(feats)


# %%
dim = 512
host_batch = torch.randn(64, dim).pin_memory()
dev_batch = torch.empty(64, dim, device="cuda")
model = FeatureModel(dim).cuda()
stage_next(host_batch, dev_batch)
model(dev_batch)
torch.cuda.synchronize()
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    out = model(dev_batch)
