"""Linear cost in methods per class (issue 27, item 3): the fix confirmation `check` runs on a
class of thousands of stream methods. Each wait asked every method of its class which events it
records (N waits x N methods), and the line diff of the fixed module was O(N·D) with D growing
with N: 800 -> 3 200 methods took 7.5 -> 70.8 s."""

from __future__ import annotations

import time

import pytest

from benchmarks.scaling import many_methods
from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.diagnostics import Confidence
from offlint.fixing import event_handoff
from offlint.fixing.availability import FIX_AVAILABILITY, changed_blocks


def test_each_method_s_recordings_are_found_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    recordings = event_handoff._recordings

    def counted(*args: object) -> object:
        nonlocal calls
        calls += 1
        return recordings(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(event_handoff, "_recordings", counted)
    n = 60
    # the hand-off fix is offered for an engine capturing whole forwards only
    settings = FileSettings(select=frozenset(load_catalogue()), min_confidence=Confidence("low"), capture_modes=("whole",))
    report = check_source(many_methods(n).encode(), "m.py", settings, fixes=FIX_AVAILABILITY)
    assert any(d.fix is not None for d in report.diagnostics)  # the handoff fixer did plan
    # 3 methods per i plus __init__: one question per method, not one per (wait, method)
    assert 0 < calls <= 3 * n + 1


def test_the_line_diff_is_linear_in_scattered_edits() -> None:
    # 30 000 unique lines with an insertion after every sixth: D = 5 000 changed lines
    before = [f"line {i}\n" for i in range(30_000)]
    after: list[str] = []
    for i, line in enumerate(before):
        after.append(line)
        if i % 6 == 0:
            after.append(f"inserted {i}\n")
    started = time.perf_counter()
    blocks = changed_blocks(before, after)
    elapsed = time.perf_counter() - started
    assert len(blocks) == 5_000 and all(b[0] == b[1] and b[3] - b[2] == 1 for b in blocks)
    assert elapsed < 2.0, elapsed  # O(N·D) Myers: 30 000 x 5 000 steps, tens of seconds
