import torch


class ExpertCache:
    def __init__(self, experts):
        self.host = [e.pin_memory() for e in experts]
        self.stream = torch.cuda.Stream()
        self.done = torch.cuda.Event()

    def load(self, i):
        with torch.cuda.stream(self.stream):
            out = self.host[i].to("cuda", non_blocking=True)
            self.done.record()
        return out

    def ready(self):
        self.done.wait()


def run_expert(x, i, cache=None):
    w = cache.load(i)
    cache.ready()
    return x @ w


class Moe(torch.nn.Module):
    def __init__(self, cache):
        super().__init__()
        self.cache = cache

    def forward(self, x):
        return run_expert(x, 0, cache=self.cache)
