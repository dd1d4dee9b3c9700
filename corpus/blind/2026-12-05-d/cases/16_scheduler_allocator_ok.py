import torch


class BlockAllocator:
    def __init__(self, n, size):
        self.stream = torch.cuda.Stream()
        self.pool = torch.empty(n, size, device="cuda")
        self.free = torch.ones(n, dtype=torch.bool, device="cuda")

    def allocate(self):
        idx = torch.nonzero(self.free)[0].item()
        self.free[idx] = False
        return self.pool[idx]

    def drain(self):
        self.stream.synchronize()
        torch.cuda.synchronize()


class Scheduler:
    def __init__(self, allocator):
        self.allocator = allocator
        self.queue = []

    def step(self, batch):
        lens = batch.sum(-1).tolist()
        if batch.max() > 0:
            self.queue.extend(lens)
        return lens
