import torch


class GraphedForward:
    """Captures the wrapped forward on the first call, replays it after."""

    def __init__(self, forward):
        self.forward = forward
        self.graph = None
        self.out = None
        self.side = torch.cuda.Stream()

    def _capture(self, x):
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.forward(x)

    def __call__(self, x):
        if self.graph is None:
            self._capture(x)
        self.side.wait_stream(torch.cuda.current_stream())
        self.graph.replay()
        torch.cuda.synchronize()
        return self.out


def install(module):
    module.forward = GraphedForward(module.forward)
