# case: the capture-state branch of a weight fetch kept inside a torch.library.custom_op (with a fake), so the compiled model stays one graph; compiled with torch.compile(fullgraph=True)
import torch
from torch import nn


def make_fetch_op(copy_stream):
    @torch.library.custom_op("blind_e::fetch_weight", mutates_args=("dev",))
    def fetch_weight(host: torch.Tensor, dev: torch.Tensor) -> None:
        if torch.cuda.is_current_stream_capturing():
            dev.copy_(host, non_blocking=True)
            return
        cur = torch.cuda.current_stream()
        copy_stream.wait_stream(cur)
        with torch.cuda.stream(copy_stream):
            dev.copy_(host, non_blocking=True)
        cur.wait_stream(copy_stream)

    @fetch_weight.register_fake
    def _(host, dev):
        return None

    return fetch_weight


class FetchedLinear(nn.Module):
    def __init__(self, dim, fetch_op):
        super().__init__()
        self.host = torch.randn(dim, dim).pin_memory()
        self.dev = torch.empty(dim, dim, device="cuda")
        self.fetch_op = fetch_op

    def forward(self, x):
        self.fetch_op(self.host, self.dev)
        return x @ self.dev


def build(dim=1024):
    op = make_fetch_op(torch.cuda.Stream())
    return torch.compile(FetchedLinear(dim, op), fullgraph=True)
