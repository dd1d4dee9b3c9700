import torch
from torch import nn


class TinyClassifier(nn.Module):
    def __init__(self, n, k):
        super().__init__()
        self.fc = nn.Linear(n, k)

    def forward(self, x):
        logits = self.fc(x)
        if logits.isnan().any():
            raise ValueError("nan")
        best = logits.max().item()
        return logits, best
