import torch

_COPY_DONE = torch.cuda.Event()
_COPY_STREAM = torch.cuda.Stream()


def kick_copy(dst, src):
    _COPY_STREAM.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_COPY_STREAM):
        dst.copy_(src, non_blocking=True)
        _COPY_DONE.record()


def consume(dst, x):
    torch.cuda.current_stream().wait_event(_COPY_DONE)
    return x @ dst


class WeightOnloader:
    def __init__(self):
        self.side = torch.cuda.Stream()
        self.ready_evt = torch.cuda.Event()

    def onload_weights_now(self):
        self.ready_evt.wait()
        return True

    def start(self, dst, src):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            dst.copy_(src, non_blocking=True)
            self.ready_evt.record()


def run_layer(mgr, dst, x):
    mgr.onload_weights_now()
    return consume(dst, x)


def capture(mgr, dst, x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = run_layer(mgr, dst, x)
    return g, y
