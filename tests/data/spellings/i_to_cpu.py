import torch


class Offload(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.s = torch.cuda.Stream()

    def forward(self, x):
        y = x * 2
        host = y.to("cpu", non_blocking=True)
        return y, host
