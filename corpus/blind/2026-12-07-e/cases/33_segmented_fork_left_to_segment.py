# case: SGLang breakable (segmented) capture: an eager break prefetches offloaded expert weights on a side stream and leaves the join (an event wait) to the next captured segment
import torch
from torch import nn

from sglang.srt.model_executor.runner_backend_utils.breakable_cuda_graph import eager_on_graph

_READY = {}  # layer id -> event recorded by the eager break


def make_expert_prefetch(layer_id, host_w, dev_w, side):
    @eager_on_graph(True)
    def prefetch_experts(expert_ids):
        ids = expert_ids.unique().tolist()
        side.wait_stream(torch.cuda.current_stream())  # expect: OFL103
        with torch.cuda.stream(side):
            for e in ids:
                dev_w[e].copy_(host_w[e], non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
        _READY[layer_id] = ev

    return prefetch_experts


class OffloadedMoE(nn.Module):
    def __init__(self, layer_id, num_experts, dim, ffn, side):
        super().__init__()
        self.layer_id = layer_id
        self.router = nn.Linear(dim, num_experts, bias=False)
        self.host_w = torch.randn(num_experts, dim, ffn, dtype=torch.bfloat16).pin_memory()
        self.dev_w = torch.empty(num_experts, dim, ffn, dtype=torch.bfloat16, device="cuda")
        self.prefetch = make_expert_prefetch(layer_id, self.host_w, self.dev_w, side)

    def forward(self, x):
        ids = self.router(x).argmax(dim=-1)
        self.prefetch(ids)
        torch.cuda.current_stream().wait_event(_READY[self.layer_id])  # expect: OFL101
        return torch.bmm(x.unsqueeze(1), self.dev_w[ids]).squeeze(1)
