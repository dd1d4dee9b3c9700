"""Capture checks inside compiled code, and the custom-op way to keep them."""
import torch


@torch.compile(fullgraph=True)
def maybe_wait(x, ev):
    if not torch.cuda.is_current_stream_capturing():
        ev.wait()
    return x * 2


@torch.library.custom_op("blindc::wait_ready", mutates_args=())
def wait_ready(x: torch.Tensor) -> torch.Tensor:
    if not torch.cuda.is_current_stream_capturing():
        torch.cuda.current_stream().synchronize()
    return x.clone()


@wait_ready.register_fake
def _(x):
    return torch.empty_like(x)


@torch.compile
def step(x):
    return wait_ready(x) + 1
