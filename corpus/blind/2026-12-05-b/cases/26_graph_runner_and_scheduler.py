"""A graph runner (warm-up, capture, replay) and a scheduler: neither runs inside a capture."""
import torch


class Scheduler:
    def __init__(self):
        self.stream = torch.cuda.Stream()
        self.done = torch.cuda.Event()

    def admit(self, lengths):
        self.done.synchronize()
        budget = int(lengths.sum().item())
        return budget < 8192

    def pick_batch(self, logits):
        return logits.argmax(-1).cpu().tolist()


class GraphRunner:
    def __init__(self, model, max_bs, hidden):
        self.model = model
        self.static_x = torch.zeros(max_bs, hidden, device="cuda")
        self.warm = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    def capture(self):
        self.warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.warm):
            for _ in range(3):
                self.model(self.static_x)
        torch.cuda.current_stream().wait_stream(self.warm)
        torch.cuda.synchronize()
        with torch.cuda.graph(self.graph):
            self.static_y = self.model(self.static_x)
        torch.cuda.synchronize()

    def replay(self, x):
        self.static_x[: x.shape[0]].copy_(x)
        self.graph.replay()
        return self.static_y[: x.shape[0]].clone()
