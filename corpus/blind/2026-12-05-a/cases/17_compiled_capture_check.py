"""Capture checks inside torch.compile'd code vs. kept out of the traced region."""
import torch


@torch.compile(fullgraph=True)
def fused_prefetch_step(x, slot, host):
    if torch.cuda.is_current_stream_capturing():
        slot.copy_(host, non_blocking=True)
    return x @ slot


@torch.compiler.disable
def _maybe_inline_copy(slot, host):
    if torch.cuda.is_current_stream_capturing():
        slot.copy_(host, non_blocking=True)


@torch.library.custom_op("offl::capture_aware_copy", mutates_args=("slot",))
def capture_aware_copy(slot: torch.Tensor, host: torch.Tensor) -> None:
    if torch.cuda.is_current_stream_capturing():
        slot.copy_(host, non_blocking=True)


@capture_aware_copy.register_fake
def _(slot, host):
    return None


def step(x, slot, host):
    _maybe_inline_copy(slot, host)
    capture_aware_copy(slot, host)
    return x @ slot


compiled_step = torch.compile(step)
