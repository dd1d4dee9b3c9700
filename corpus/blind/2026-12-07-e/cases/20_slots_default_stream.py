# case: a __slots__ offload helper writes the next layer's weights on the default stream from inside forward; the block is wrapped with torch.cuda.make_graphed_callables
import torch
from torch import nn


class DefaultStreamStager:
    __slots__ = ("host", "dev")

    def __init__(self, host, dev):
        self.host = host
        self.dev = dev

    def stage(self):
        with torch.cuda.stream(torch.cuda.default_stream()):  # expect: OFL104
            self.dev.copy_(self.host, non_blocking=True)


class StagedBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.next_w = torch.empty(dim, dim, device="cuda")
        self.stager = DefaultStreamStager(torch.randn(dim, dim).pin_memory(), self.next_w)

    def forward(self, x):
        self.stager.stage()
        return torch.relu(self.fc(x))


def graphed_block(dim=1024, batch=32):
    block = StagedBlock(dim).cuda()
    sample = torch.randn(batch, dim, device="cuda", requires_grad=True)
    return torch.cuda.make_graphed_callables(block, (sample,))
