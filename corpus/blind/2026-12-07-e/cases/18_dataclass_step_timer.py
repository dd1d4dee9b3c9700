# case: per-step GPU timing kept in a dataclass on the offload manager; events are recorded inside the forward that TimedGraphRunner captures, and read back after each replay
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class StepTimer:
    start: torch.cuda.Event = field(default_factory=lambda: torch.cuda.Event(enable_timing=True))  # allow: OFL107
    end: torch.cuda.Event = field(default_factory=lambda: torch.cuda.Event(enable_timing=True))  # allow: OFL107
    history: list = field(default_factory=list)


class OffloadManager:
    def __init__(self):
        self.timer = StepTimer()
        self.copy_stream = torch.cuda.Stream()


class TimedOffloadModel(nn.Module):
    def __init__(self, manager, dim):
        super().__init__()
        self.manager = manager
        self.host_w = torch.randn(dim, dim).pin_memory()
        self.w = torch.empty(dim, dim, device="cuda")

    def forward(self, x):
        t = self.manager.timer
        t.start.record()
        cur = torch.cuda.current_stream()
        self.manager.copy_stream.wait_stream(cur)
        with torch.cuda.stream(self.manager.copy_stream):
            self.w.copy_(self.host_w, non_blocking=True)
        cur.wait_stream(self.manager.copy_stream)
        y = x @ self.w
        t.end.record()
        return y


class TimedGraphRunner:
    def __init__(self, model, x):
        self.model = model
        self.x = x
        self.graph = torch.cuda.CUDAGraph()

    def capture(self):
        self.model(self.x)
        torch.cuda.synchronize()
        with torch.cuda.graph(self.graph):
            self.y = self.model(self.x)

    def step(self):
        self.graph.replay()
        t = self.model.manager.timer
        t.end.synchronize()  # expect: OFL107
        t.history.append(t.start.elapsed_time(t.end))  # expect: OFL107
        return self.y
