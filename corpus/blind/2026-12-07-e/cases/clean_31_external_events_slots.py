# case: cross-graph ordering with events made external=True: a prefill graph records into an event list, a decode graph waits on them; both captured with capture_begin()/capture_end()
import torch


class ExternalMarks:
    __slots__ = ("events",)

    def __init__(self, n):
        self.events = [torch.cuda.Event(external=True) for _ in range(n)]


def prefill_step(marks, kv_host, kv_dev, side):
    cur = torch.cuda.current_stream()
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        for i in range(len(marks.events)):
            kv_dev[i].copy_(kv_host[i], non_blocking=True)
            marks.events[i].record(side)
    cur.wait_stream(side)


def decode_step(marks, kv_dev, q):
    cur = torch.cuda.current_stream()
    out = q
    for i, ev in enumerate(marks.events):
        cur.wait_event(ev)
        out = out + (q @ kv_dev[i].t()).softmax(-1) @ kv_dev[i]
    return out


def capture_pair(n=4, tokens=256, dim=128, batch=8):
    marks = ExternalMarks(n)
    kv_host = torch.randn(n, tokens, dim).pin_memory()
    kv_dev = torch.empty(n, tokens, dim, device="cuda")
    q = torch.zeros(batch, dim, device="cuda")
    side = torch.cuda.Stream()
    prefill_step(marks, kv_host, kv_dev, side)
    decode_step(marks, kv_dev, q)
    torch.cuda.synchronize()

    pool = torch.cuda.graph_pool_handle()
    g_prefill, g_decode = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g_prefill.capture_begin(pool=pool)
        prefill_step(marks, kv_host, kv_dev, side)
        g_prefill.capture_end()
        g_decode.capture_begin(pool=pool)
        out = decode_step(marks, kv_dev, q)
        g_decode.capture_end()
    torch.cuda.current_stream().wait_stream(s)
    return g_prefill, g_decode, out
