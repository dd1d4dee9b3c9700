# case: module-level torch.compile of a model whose weight-streaming helper imports the capture test under an alias
import torch
from torch import nn
from torch.cuda import is_current_stream_capturing as _capturing

_stream = torch.cuda.Stream()


def fetch(host, dev):
    if not _capturing():  # expect: OFL301
        _stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_stream):
            dev.copy_(host, non_blocking=True)
        torch.cuda.current_stream().wait_stream(_stream)
    else:
        dev.copy_(host, non_blocking=True)
    return dev


class StreamedMLP(nn.Module):
    def __init__(self, dim, ffn):
        super().__init__()
        self.host_up = torch.randn(dim, ffn).pin_memory()
        self.host_down = torch.randn(ffn, dim).pin_memory()
        self.up = torch.empty(dim, ffn, device="cuda")
        self.down = torch.empty(ffn, dim, device="cuda")

    def forward(self, x):
        up = fetch(self.host_up, self.up)
        down = fetch(self.host_down, self.down)
        return torch.relu(x @ up) @ down


model = torch.compile(StreamedMLP(1024, 4096))
out = model(torch.randn(8, 1024, device="cuda"))
