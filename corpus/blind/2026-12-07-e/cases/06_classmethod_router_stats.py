# case: activation-offloading block whose forward logs routing stats through a classmethod; training step graphed with torch.cuda.make_graphed_callables
import torch
from torch import nn


class RoutingStats:
    counts = {}

    @classmethod
    def observe(cls, name, topk_ids, num_experts):
        hist = torch.bincount(topk_ids.flatten(), minlength=num_experts)  # allow: OFL105
        cls.counts[name] = cls.counts.get(name, 0) + int(hist.max().item())  # expect: OFL105


class OffloadedMoEBlock(nn.Module):
    def __init__(self, hidden, num_experts, top_k=2):
        super().__init__()
        self.gate = nn.Linear(hidden, num_experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(num_experts))
        self.num_experts = num_experts
        self.top_k = top_k
        self.offload_stream = torch.cuda.Stream()

    def forward(self, x):
        logits = self.gate(x)
        weights, ids = torch.topk(logits.softmax(-1), self.top_k, dim=-1)
        RoutingStats.observe("block", ids, self.num_experts)
        out = torch.zeros_like(x)
        for e in range(self.num_experts):
            w = (weights * (ids == e)).sum(-1, keepdim=True)
            out = out + w * self.experts[e](x)
        return out


def build_graphed(hidden=512, num_experts=8, batch=32):
    block = OffloadedMoEBlock(hidden, num_experts).cuda()
    sample = torch.randn(batch, hidden, device="cuda", requires_grad=True)
    return torch.cuda.make_graphed_callables(block, (sample,))
