import torch


@torch.compile(fullgraph=True)
def onload_compiled(x, w_slot):
    if torch.cuda.is_current_stream_capturing():
        return x @ w_slot
    return x @ w_slot * 1.0


@torch.compiler.disable
def _capturing_eager():
    return torch.cuda.is_current_stream_capturing()


def eager_dispatch(x, w_slot):
    if torch.cuda.is_current_stream_capturing():
        return x @ w_slot
    return x @ w_slot


@torch.library.custom_op("blindd::maybe_wait", mutates_args=())
def maybe_wait(x: torch.Tensor) -> torch.Tensor:
    if torch.cuda.is_current_stream_capturing():
        return x.clone()
    return x.clone()


@maybe_wait.register_fake
def _(x):
    return torch.empty_like(x)


@torch.compile
def layer(x, w_slot):
    x = maybe_wait(x)
    flag = _capturing_eager()
    return x @ w_slot if flag else x @ w_slot
