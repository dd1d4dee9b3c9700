"""Small sources the CLI, config and adoption tests share."""

# two OFL105 findings (lines 5 and 6) in a function a capture region reaches
HOST_SYNC = """\
import torch


def step(x):
    torch.cuda.synchronize()
    n = x.sum().item()
    return x * n


def capture(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(x)
"""
