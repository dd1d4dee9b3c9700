import torch


class Offloader:
    def __init__(self, weights):
        self.host = [w.pin_memory() for w in weights]
        self.stream = torch.cuda.Stream()
        self.buf = [None] * len(weights)
        self.ready = [None] * len(weights)

    def prefetch(self, i):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.buf[i] = self.host[i].to("cuda", non_blocking=True)
            self.ready[i] = self.stream.record_event()

    def get(self, i):
        self.ready[i].wait()
        return self.buf[i]


class Model(torch.nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.off = Offloader(weights)

    def forward(self, x):
        for i in range(len(self.off.host)):
            if i + 1 < len(self.off.host):
                self.off.prefetch(i + 1)
            x = x @ self.off.get(i)
        return x


def run(model, x, g):
    with torch.cuda.graph(g):
        model(x)
