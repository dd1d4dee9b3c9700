import torch

from . import experts


def build(num_layers=4, num_experts=8, hidden=512, ffn=1024):
    layers = [experts.SwappedExperts(num_experts, hidden, ffn) for _ in range(num_layers)]
    for a, b in zip(layers, layers[1:] + layers[:1]):
        a.next = b
    layers[0].issue_copy()
    return layers


def run_layers(layers, x, ids):
    for layer in layers:
        x = layer(x, ids)
    return x


def capture_decode(layers, batch=8, hidden=512):
    x = torch.zeros(batch, hidden, device="cuda", dtype=torch.bfloat16)
    ids = torch.zeros(batch, dtype=torch.long, device="cuda")
    run_layers(layers, x, ids)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = run_layers(layers, x, ids)
    return g, (x, ids), y
