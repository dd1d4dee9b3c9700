from torch import nn


class HostExperts(nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.experts = [w.to("cpu") for w in weights]

    def forward(self, x, idx):
        w = self.experts[idx].to(x.device)
        return x @ w
