# case: a generator streams each layer's weights onto the device on a side stream and yields them; the training step is wrapped with torch.cuda.make_graphed_callables
import torch
from torch import nn


def stream_weights(host_weights, side):
    """Yield device copies of host_weights, copying each on `side`."""
    side.wait_stream(torch.cuda.current_stream())  # expect: OFL103
    for w in host_weights:
        with torch.cuda.stream(side):
            dev = w.to("cuda", non_blocking=True)
        yield dev


class StreamedStack(nn.Module):
    def __init__(self, n_layers, dim):
        super().__init__()
        self.host_weights = [torch.randn(dim, dim).pin_memory() for _ in range(n_layers)]
        self.side = torch.cuda.Stream()

    def forward(self, x):
        for w in stream_weights(self.host_weights, self.side):
            x = torch.nn.functional.gelu(x @ w)  # expect: OFL205
        return x


def graphed_stack(n_layers=6, dim=1024, batch=64):
    stack = StreamedStack(n_layers, dim)
    sample = torch.randn(batch, dim, device="cuda", requires_grad=True)
    return torch.cuda.make_graphed_callables(stack, (sample,))
