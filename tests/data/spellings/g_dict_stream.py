import torch


class Prefetch(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w.pin_memory()
        self.streams = {"copy": torch.cuda.Stream()}

    def forward(self, x):
        s = self.streams["copy"]
        with torch.cuda.stream(s):  # expect: OFL104
            wd = self.w.to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(s)  # expect: OFL102
        return x @ wd
