import torch


def capturing(graph, pool=None):
    return torch.cuda.graph(graph, pool=pool)


def step(model, x):
    return model(x).max().item()


def capture(model, x):
    g = torch.cuda.CUDAGraph()
    with capturing(g):
        step(model, x)
    return g
