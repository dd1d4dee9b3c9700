"""Hooks defined as closures in __init__ run on every forward; the constructor's own sync does not."""
import torch
from torch import nn


class HookedOffload:
    def __init__(self, model: nn.Module):
        self.stream = torch.cuda.Stream()
        self.model = model
        torch.cuda.synchronize()

        def pre_hook(module, args):
            self.stream.synchronize()
            return args

        def post_hook(module, args, output):
            return output

        for m in model.modules():
            m.register_forward_pre_hook(pre_hook)
            m.register_forward_hook(post_hook)
