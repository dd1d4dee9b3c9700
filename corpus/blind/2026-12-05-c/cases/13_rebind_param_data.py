"""Weight swap for LoRA-style hot reload on an offloader whose forward copies from a pinned host tensor."""
import torch
from torch import nn


class SwappableOffloader(nn.Module):
    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.linear = linear
        self.host_w = linear.weight.detach().cpu().pin_memory()
        self.dev_w = torch.empty_like(self.host_w, device="cuda")
        self.stream = torch.cuda.Stream()

    def forward(self, x):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.dev_w.copy_(self.host_w, non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.stream)
        return x @ self.dev_w.t()

    def swap_weights(self, new_w):
        self.host_w = new_w.cpu().pin_memory()
        self.dev_w.copy_(self.host_w)

    def reload_in_place(self, new_w):
        self.host_w.copy_(new_w)
