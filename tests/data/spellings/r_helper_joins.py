import torch
from torch import nn


def block_on(event):
    torch.cuda.current_stream().wait_event(event)


class Primed(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.copy_stream = torch.cuda.Stream()
        self.host = w.pin_memory()
        self.dev = torch.empty_like(self.host, device="cuda")

    def forward(self, x):
        done = torch.cuda.Event()
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            self.dev.copy_(self.host, non_blocking=True)
            done.record()
        block_on(done)
        return x @ self.dev
