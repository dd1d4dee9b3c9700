import torch


class Base:
    def get(self):
        self.event.wait()  # expect: OFL101
        return self.buf


class Prefetcher(Base):
    def __init__(self):
        self.stream = torch.cuda.Stream()
        self.event = torch.cuda.Event()

    def prefetch(self, w):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.buf = w.to("cuda", non_blocking=True)
            self.event.record()


def capture(g):
    p = Prefetcher()
    with torch.cuda.graph(g):
        p.get()
