"""Scheduler, block allocator and start-up loader: host syncs everywhere, none capture-reachable."""
import torch


class BlockAllocator:
    def __init__(self, num_blocks, block_bytes):
        self.host = torch.empty(num_blocks, block_bytes, dtype=torch.uint8, pin_memory=True)
        self.free = list(range(num_blocks))
        self.stream = torch.cuda.Stream()

    def allocate(self, n):
        ids = [self.free.pop() for _ in range(n)]
        return torch.tensor(ids, device="cuda")

    def swap_out(self, dev_blocks, ids):
        with torch.cuda.stream(self.stream):
            self.host[ids].copy_(dev_blocks, non_blocking=True)
        self.stream.synchronize()


class Scheduler:
    def __init__(self, allocator: BlockAllocator):
        self.allocator = allocator

    def schedule(self, seq_lens):
        total = int(seq_lens.sum().item())
        torch.cuda.synchronize()
        return self.allocator.allocate(total // 16 + 1)


def load_weights(model, state):
    for name, p in model.named_parameters():
        p.data = state[name].to("cuda")
    torch.cuda.synchronize()
