import torch
from torch import nn


class PinnedSourceOnload(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.host_w = w.detach().cpu().pin_memory()
        self.dev_w = torch.empty_like(self.host_w, device="cuda")
        self.stream = torch.cuda.Stream()

    def forward(self, x):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.dev_w.copy_(self.host_w, non_blocking=True)
        torch.cuda.current_stream().wait_stream(self.stream)
        return x @ self.dev_w

    def update_weights(self, new_w):
        self.host_w = new_w.detach().cpu().pin_memory()
        return self

    def update_weights_in_place(self, new_w):
        self.host_w.copy_(new_w)
        return self
