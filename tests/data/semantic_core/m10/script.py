import torch

stream = torch.cuda.Stream()
host = torch.randn(64, 64).pin_memory()
ready = torch.cuda.Event()


def prefetch():
    with torch.cuda.stream(stream):
        dev = host.to("cuda", non_blocking=True)
        ready.record()
    return dev


w = prefetch()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    ready.wait()
    y = torch.ones(64, device="cuda") @ w
    print(y.sum().item())
