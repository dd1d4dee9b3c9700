"""Start-up loader that pins shards on worker threads and joins them before any capture."""
from concurrent.futures import ThreadPoolExecutor

import torch


def _pin(t):
    return t.pin_memory()


def load_pinned(shards):
    with ThreadPoolExecutor(4) as ex:
        pinned = list(ex.map(_pin, shards))
    torch.cuda.synchronize()
    return pinned


def build_and_capture(model, shards, x):
    weights = load_pinned(shards)
    model.bind(weights)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        y = model(x)
    return g, y
