import torch


def timed_block(x, w):
    start = torch.cuda.Event()
    start.record()
    y = x @ w
    if start.query():
        y = y + 0
    return y


def timed_block_ok(x, w):
    y = x @ w
    return y


def capture(x, w):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g.capture_begin()
        out = timed_block(x, w)
        out2 = timed_block_ok(x, w)
        g.capture_end()
    torch.cuda.current_stream().wait_stream(s)
    return g, out, out2


def measure(x, w):
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    x @ w
    b.record()
    b.synchronize()
    return a.elapsed_time(b)
