"""Output-ready events recorded inside a captured step and waited eagerly afterwards."""
import torch


class DecodeGraph:
    def __init__(self, model, static_in):
        self.model = model
        self.static_in = static_in
        self.d2h = torch.cuda.Stream()
        self.out_ready = torch.cuda.Event()
        self.graph = torch.cuda.CUDAGraph()
        self.host_out = None

    def capture(self):
        with torch.cuda.graph(self.graph):
            self.static_out = self.model(self.static_in)
            self.out_ready.record()

    def step(self):
        self.graph.replay()
        self.d2h.wait_event(self.out_ready)
        with torch.cuda.stream(self.d2h):
            self.host_out = self.static_out.to("cpu", non_blocking=True)
        return self.host_out


class DecodeGraphExternal:
    def __init__(self, model, static_in):
        self.model = model
        self.static_in = static_in
        self.d2h = torch.cuda.Stream()
        self.out_ready = torch.cuda.Event(external=True)
        self.graph = torch.cuda.CUDAGraph()

    def capture(self):
        with torch.cuda.graph(self.graph):
            self.static_out = self.model(self.static_in)
            self.out_ready.record()

    def step(self):
        self.graph.replay()
        self.d2h.wait_event(self.out_ready)
        return self.static_out
