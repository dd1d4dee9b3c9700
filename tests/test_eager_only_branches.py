"""Branches no inference capture takes. One under which the forward registers gradient hooks on
tensors runs with autograd recording: training (the engines capture under `no_grad`, where that
registration raises; DeepSpeed's Ulysses attention joins its overlap stream there). One that places
a module on the execution device only when it is not there yet runs on the first forward after an
offload: the warm-up every capture follows (accelerate's `CpuOffload`, diffusers' auto-offload)."""

from __future__ import annotations

import textwrap

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue

ALL = frozenset(load_catalogue())

ATTENTION = """\
import torch


class DistributedAttention(torch.nn.Module):
    def __init__(self, side):
        super().__init__()
        self.side = torch.cuda.Stream()
        self.default_stream = torch.cuda.default_stream()
        self.overlap = side is not None

    def forward(self, query, key):
        if self.overlap:
            self.default_stream.wait_stream(self.side)
        out = query @ key
        if self.overlap:
            query.register_hook(lambda grad: grad)
        return out
"""


def _found(source: str) -> list[tuple[int, str]]:
    report = check_source(textwrap.dedent(source).encode(), "case.py", FileSettings(select=ALL))
    assert not report.errors, report.errors
    return sorted((d.location.line, d.code) for d in report.diagnostics)


def test_a_branch_that_registers_gradient_hooks_is_not_captured() -> None:
    assert _found(ATTENTION) == []


def test_without_the_hook_the_same_join_is_reported() -> None:
    inference = ATTENTION.replace("            query.register_hook(lambda grad: grad)\n", "            out = out * 2\n")
    wait = next(i for i, line in enumerate(inference.splitlines(), 1) if "wait_stream(self.side)" in line)
    assert (wait, "OFL102") in _found(inference)


# -- a hook that places its module only when it is not on the execution device yet ------------

PLACE_ONCE = """\
import torch


class CpuOffload(ModelHook):
    def __init__(self, execution_device):
        self.execution_device = execution_device

    def init_hook(self, module):
        return module.to("cpu")

    def pre_forward(self, module, *args, **kwargs):
        current_device = next(module.parameters()).device
        if current_device == self.execution_device:
            return args, kwargs
        module.to(self.execution_device)
        return args, kwargs
"""


def test_a_move_made_only_when_the_module_is_not_there_yet_is_warm_up_work() -> None:
    """After the warm-up forward the module is on the device: the capture's forward returns
    before the move (measured on an H200 with accelerate's cpu_offload_with_hook)."""
    assert _found(PLACE_ONCE) == []
    every_forward = PLACE_ONCE.replace(
        "        if current_device == self.execution_device:\n            return args, kwargs\n", ""
    )
    move = next(i for i, line in enumerate(every_forward.splitlines(), 1) if "module.to(self.execution_device)" in line)
    assert (move, "OFL106") in _found(every_forward)
