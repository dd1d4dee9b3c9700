import torch
from torch import nn


class PageableOnload(nn.Module):
    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.stream = torch.cuda.Stream()
        self.host_w = linear.weight.detach().cpu()  # pageable
        self.pinned_w = linear.weight.detach().cpu().pin_memory()
        self.dev_w = torch.empty_like(self.pinned_w, device="cuda")

    def forward(self, x):
        w = self.host_w.to("cuda", non_blocking=True)
        scale = torch.tensor([0.5, 2.0], device="cuda")
        self.dev_w.copy_(self.pinned_w, non_blocking=True)
        return (x @ w.t()) * scale[0] + x @ self.dev_w.t()
