"""H2D copies in an offloader forward: pageable vs pinned sources."""
import torch
from torch import nn


class CopyKinds(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w_pageable = w.cpu()
        self.w_pinned = w.cpu().pin_memory()
        self.w_dev = torch.empty_like(w, device="cuda")
        self.stream = torch.cuda.Stream()
        self.bias_host = [0.0] * w.shape[0]

    def forward(self, x):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.w_dev.copy_(self.w_pinned, non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.stream)
        extra = self.w_pageable.cuda()
        bias = torch.tensor(self.bias_host, device=x.device)
        out = x @ (self.w_dev + extra)
        host_out = out.to("cpu", non_blocking=True)
        return out + bias, host_out
