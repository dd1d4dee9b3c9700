"""A branch under which the forward registers gradient hooks on tensors runs with autograd
recording: training. The inference engines capture under `no_grad`/`inference_mode`, where that
registration raises, so their captures never take the branch (DeepSpeed's Ulysses attention joins
its overlap stream there)."""

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
