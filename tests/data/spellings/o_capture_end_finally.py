import torch


def step(model, x):
    return model(x)


class Graphed:
    def __init__(self, model, x):
        self.model, self.x = model, x
        self.graph = torch.cuda.CUDAGraph()

    def record(self):
        torch.cuda.synchronize()
        self.graph.capture_begin()
        try:
            self.out = step(self.model, self.x)
            self.x.item()  # expect: OFL105
        finally:
            self.graph.capture_end()
        torch.cuda.synchronize()
