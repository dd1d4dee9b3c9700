# case: prefetch installed as forward pre-hooks built in a closure; the prefetch of layer 0 for the next step is issued by the last layer; capture_forward() captures with torch.cuda.graph
import torch
from torch import nn


def install_prefetch_hooks(blocks, host_weights, slots):
    """blocks[i] reads slots[i]; host_weights[i] is the pinned source of slots[i]."""
    stream = torch.cuda.Stream()
    n = len(blocks)

    def make_pre_hook(i):
        def pre_hook(module, args):
            cur = torch.cuda.current_stream()
            # the copy for this block was issued by the previous block's hook
            cur.wait_stream(stream)  # expect: OFL102
            nxt = (i + 1) % n
            stream.wait_stream(cur)  # expect: OFL103
            with torch.cuda.stream(stream):
                slots[nxt].copy_(host_weights[nxt], non_blocking=True)
        return pre_hook

    for i, block in enumerate(blocks):
        block.register_forward_pre_hook(make_pre_hook(i))


class Block(nn.Module):
    def __init__(self, slot):
        super().__init__()
        self.slot = slot

    def forward(self, x):
        return torch.tanh(x @ self.slot)


def build(n=8, hidden=1024):
    host = [torch.randn(hidden, hidden, dtype=torch.bfloat16).pin_memory() for _ in range(n)]
    slots = [torch.empty(hidden, hidden, dtype=torch.bfloat16, device="cuda") for _ in range(n)]
    blocks = nn.Sequential(*[Block(s) for s in slots])
    install_prefetch_hooks(list(blocks), host, slots)
    return blocks


def capture_forward(model, x):
    model(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = model(x)
    return g, y
