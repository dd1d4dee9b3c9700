import torch

STREAM = torch.cuda.Stream()
EVENT = torch.cuda.Event()
BUF = {}


def prefetch(w):
    STREAM.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(STREAM):
        BUF["w"] = w.to("cuda", non_blocking=True)
        EVENT.record()


def get():
    EVENT.wait()  # expect: OFL101
    return BUF["w"]


def capture(g):
    with torch.cuda.graph(g):
        get()
