"""Diagnostics of the capture-reachability rules (OFL101-OFL107) say why their code counts as
capture-reachable: the reason the model recorded, followed back along same-module calls to where
reachability starts. Both front ends give the same note."""

from __future__ import annotations

import textwrap

import pytest

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue

CATALOGUE = load_catalogue()
ALL = frozenset(CATALOGUE)


def notes(source: str, front_end: str) -> list[tuple[str, int, str | None]]:
    data = textwrap.dedent(source).encode()
    settings = FileSettings(select=ALL, front_end=front_end)
    report = check_source(data, "case.py", settings)
    assert not report.errors
    return [(d.code, d.location.line, d.note) for d in report.diagnostics]


FRONT_ENDS = pytest.mark.parametrize("front_end", ["skeleton", "libcst"])


@FRONT_ENDS
def test_a_chain_of_calls_is_followed_back_to_its_start(front_end: str) -> None:
    source = """\
        import torch
        from torch import nn


        def count(x):
            return int(x.sum().item())


        class Block(nn.Module):
            def _impl(self, x):
                return count(x)

            def forward(self, x):
                if torch.cuda.is_current_stream_capturing():
                    return self._impl(x)
                return x


        class Model(nn.Module):
            def forward(self, x):
                return count(x)  # a plain model's forward: no capture reaches it in this tree
        """
    assert notes(source, front_end) == [
        (
            "OFL105",
            6,
            "capture-reachable: called from Block._impl ← Block.forward"
            " (tests is_current_stream_capturing())",
        )
    ]


@FRONT_ENDS
def test_offloader_style_classes_say_what_made_them_count(front_end: str) -> None:
    holds = """\
        import torch


        class Offloader:
            def __init__(self):
                self.copy_stream = torch.cuda.Stream()

            def ready(self, x):
                return x.item()
        """
    assert notes(holds, front_end) == [
        (
            "OFL105",
            9,
            "capture-reachable: method of offloader-style class Offloader:"
            " it keeps a CUDA stream or event in self.copy_stream",
        )
    ]
    orders = """\
        import torch


        class Prefetcher:
            def fetch(self, side):
                torch.cuda.current_stream().wait_stream(side)

            def ready(self, x):
                return x.tolist()
        """
    found = [n for n in notes(orders, front_end) if n[0] == "OFL105"]
    assert found == [
        (
            "OFL105",
            9,
            "capture-reachable: method of offloader-style class Prefetcher:"
            " it orders streams, wait_stream in fetch",
        )
    ]


@FRONT_ENDS
def test_rules_that_do_not_depend_on_reachability_carry_no_note(front_end: str) -> None:
    for example in CATALOGUE["OFL204"].bad:  # record_stream misuse is wrong captured or not
        ofl204 = [note for code, _, note in notes(example.code, front_end) if code == "OFL204"]
        assert ofl204 and all(note is None for note in ofl204)
