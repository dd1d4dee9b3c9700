import functools
import torch
from torch import nn

events = {}


def wait_for(name, module, args):
    events[name].wait()


def record_for(name, module, args, output):
    events[name].record()


def install(model: nn.Module):
    for name, layer in model.named_children():
        events[name] = torch.cuda.Event()
        layer.register_forward_pre_hook(functools.partial(wait_for, name))
        layer.register_forward_hook(functools.partial(record_for, name))
        layer.register_forward_hook(lambda mod, args, out: out.sum().item())
