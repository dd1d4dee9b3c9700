import torch


def should_pin():
    return torch.cuda.is_available()


class Offload(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.s = torch.cuda.Stream()
        self.host = torch.empty(w.shape, pin_memory=should_pin())
        self.host.copy_(w)

    def forward(self, x):
        wd = self.host.to("cuda", non_blocking=True)  # expect: OFL106
        return x @ wd
