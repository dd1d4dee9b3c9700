import torch


class Prefetch(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w.pin_memory()
        self.copy_stream = torch.cuda.current_stream()

    def forward(self, x):
        with torch.cuda.stream(self.copy_stream):  # expect: OFL104
            wd = self.w.to("cuda", non_blocking=True)
        return x @ wd  # expect: OFL205
