import torch

from .base import SwapBase


class SwappedExperts(SwapBase):
    def __init__(self, num_experts, hidden, ffn):
        super().__init__((num_experts, hidden, ffn))
        self.next = None

    def forward(self, x, expert_ids):
        x = super().forward(x)  # allow: OFL101
        w = self.slot[expert_ids]
        out = torch.bmm(x.unsqueeze(1), w).squeeze(1)
        if self.next is not None:
            # overlap the next layer's swap with this layer's tail
            self.next.issue_copy()  # allow: OFL103
        return out
