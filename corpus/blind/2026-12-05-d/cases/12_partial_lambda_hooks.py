import functools

import torch
from torch import nn


def _onload(mgr, module, args):
    mgr.stream.synchronize()
    return None


class GroupOnloader:
    def __init__(self, model: nn.Module):
        self.stream = torch.cuda.Stream()
        self.model = model
        for block in model.children():
            block.register_forward_pre_hook(functools.partial(_onload, self))
        model.register_forward_hook(lambda m, a, out: out.float().mean().item())

    def report(self):
        self.stream.synchronize()
        return True
