"""Scheduler and block allocator of a serving engine: streams, events, syncs, pinning, all outside any graph."""
import torch


class PinnedBlockAllocator:
    def __init__(self, num_blocks, block_numel, dtype=torch.float16):
        self.storage = torch.empty(num_blocks, block_numel, dtype=dtype, pin_memory=True)
        self.free = list(range(num_blocks))
        self.copy_stream = torch.cuda.Stream()
        self.done = torch.cuda.Event()

    def swap_out(self, gpu_blocks, ids):
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            self.storage[ids].copy_(gpu_blocks, non_blocking=True)
        self.done.record(self.copy_stream)

    def wait_swaps(self):
        self.done.synchronize()


class Scheduler:
    def __init__(self, allocator: PinnedBlockAllocator, runner):
        self.allocator = allocator
        self.runner = runner
        self.step_done = torch.cuda.Event()

    def schedule(self, waiting):
        batch = waiting[:8]
        lengths = torch.tensor([len(r) for r in batch])
        budget = int(lengths.sum().item())
        return batch, budget

    def run_step(self, batch):
        out = self.runner.execute(batch)
        self.step_done.record()
        self.step_done.synchronize()
        return out.argmax(-1).tolist()
