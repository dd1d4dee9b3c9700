import torch
from torch import nn


class Slot:
    def __init__(self, w):
        self.host = w.pin_memory()
        self.copy_done = torch.cuda.Event()
        self.side = torch.cuda.Stream()
        self.dev = torch.empty_like(w, device="cuda")

    def fill(self):
        with torch.cuda.stream(self.side):
            self.dev.copy_(self.host, non_blocking=True)
            self.copy_done.record()

    @property
    def weight(self):
        self.copy_done.wait()
        return self.dev


class Linear(nn.Module):
    def __init__(self, slot):
        super().__init__()
        self.slot = slot

    def forward(self, x):
        return x @ self.slot.weight
