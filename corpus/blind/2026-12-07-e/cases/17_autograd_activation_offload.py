# case: activation offloading as an autograd Function: forward copies the saved activation into a shared pinned buffer after waiting for the previous layer's offload; the train step is captured with capture_begin()/capture_end()
import torch

_D2H_STREAM = torch.cuda.Stream()
_HOST_BUF = torch.empty(64 * 1024 * 1024, dtype=torch.uint8, pin_memory=True)
_last_offload = None  # event of the latest D2H into _HOST_BUF


class OffloadActivation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        global _last_offload
        cur = torch.cuda.current_stream()
        if _last_offload is not None:
            cur.wait_event(_last_offload)  # expect: OFL101
        nbytes = x.numel() * x.element_size()
        host = _HOST_BUF[:nbytes].view(x.dtype).view(x.shape)
        _D2H_STREAM.wait_stream(cur)  # expect: OFL103
        with torch.cuda.stream(_D2H_STREAM):
            host.copy_(x, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
        _last_offload = ev
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


def offloaded_block(x, weight):
    h = torch.relu(x @ weight)
    return OffloadActivation.apply(h)


def capture_train_step(weight, x):
    offloaded_block(x, weight).sum().backward()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g.capture_begin()
        loss = offloaded_block(x, weight).sum()
        loss.backward()
        g.capture_end()
    torch.cuda.current_stream().wait_stream(s)
    return g, loss
