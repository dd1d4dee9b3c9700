"""A fix belongs to its finding (issue 33): `check` attaches to each finding the edits that fix
it, planned from that finding's facts; `fix` applies exactly those (the non-overlapping ones per
round), re-checks, and stops when the re-check attaches nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.analysis import engine
from offlint.analysis.engine import check_source
from offlint.catalogue import load_catalogue
from offlint.cli import main
from offlint.diagnostics import Confidence, Diagnostic
from offlint.fixing import loop as apply_module
from offlint.fixing.apply import FIXABLE_RULES, FixSettings, _check_settings
from offlint.fixing.availability import FIX_AVAILABILITY
from offlint.fixing.loop import apply_text_edits, fix_source

ROOT = Path(__file__).resolve().parent.parent
SELECT = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)

# The side stream recorded for a tensor handed in (`grad`, used on the side stream) is right, and
# OFL204 leaves it alone; `weight`, made in the block, is the no-op record the rule reports.
HANDED_IN = """\
import torch


class Prefetch:
    def __init__(self):
        self.side = torch.cuda.Stream()

    def load(self, grad, host):
        with torch.cuda.stream(self.side):
            weight = host.to("cuda", non_blocking=True)
            weight.record_stream(torch.cuda.current_stream())
            grad.mul_(2)
            grad.record_stream(torch.cuda.current_stream())
        return weight
"""

TWO_BLOCKS = """\
import torch


class Prefetch:
    def __init__(self):
        self.side = torch.cuda.Stream()
        self.other = torch.cuda.Stream()

    def load(self, host):
        with torch.cuda.stream(self.side):
            weight = host.to("cuda", non_blocking=True)
            weight.record_stream(torch.cuda.current_stream())
        return weight

    def load_bias(self, host):
        with torch.cuda.stream(self.other):
            bias = host.to("cuda", non_blocking=True)
            bias.record_stream(torch.cuda.current_stream())
        return bias
"""


def _checked(source: str, settings: FixSettings | None = None) -> list[Diagnostic]:
    settings = settings or FixSettings(select=SELECT)
    report = check_source(source.encode(), "m.py", _check_settings(settings), fixes=FIX_AVAILABILITY)
    assert not report.errors
    return [d for d in report.diagnostics if d.confidence.at_least(settings.min_confidence)]


def test_check_fix_changes_only_the_findings_own_record_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The safe OFL204 fix, applied by `check --fix`, rewrites the finding's `record_stream` and
    never the one the rule deliberately leaves alone (before, it rewrote both: the handed-in
    tensor's correct record became the very no-op OFL204 exists to catch, and nothing said so)."""
    (tmp_path / "m.py").write_text(HANDED_IN)
    monkeypatch.chdir(tmp_path)
    (finding,) = [d for d in _checked(HANDED_IN) if d.code == "OFL204"]
    assert finding.location.line == 11 and finding.fix is not None
    result = CliRunner().invoke(main, ["check", "--fix", "--no-cache", "--no-color", "m.py"])
    assert result.exit_code == 0, result.output
    after = (tmp_path / "m.py").read_text().splitlines()
    before = HANDED_IN.splitlines()
    assert "            weight.record_stream(consumer_stream)" in after
    assert "            grad.record_stream(torch.cuda.current_stream())" in after  # left alone
    changed = [line for line in before if line not in after]
    assert changed == ["            weight.record_stream(torch.cuda.current_stream())"]
    # and the re-check reports nothing new: the fix's own code is no finding
    assert _checked((tmp_path / "m.py").read_text()) == []


def test_each_finding_carries_its_own_fix_editing_only_its_statements() -> None:
    first, second = [d for d in _checked(TWO_BLOCKS) if d.code == "OFL204"]
    assert first.fix is not None and second.fix is not None
    assert first.fix.edits != second.fix.edits
    # each edit lies at its own finding's `with` block (the hoisted stream goes right above it)
    assert all(9 <= e.line <= 12 for e in first.fix.edits)
    assert all(15 <= e.line <= 18 for e in second.fix.edits)
    # applying one finding's fix alone fixes that finding and leaves the other as it was
    alone = apply_text_edits(TWO_BLOCKS.encode(), first.fix.edits)
    assert alone is not None
    left = _checked(alone.decode())
    assert [(d.code, d.location.line) for d in left] == [("OFL204", second.location.line + 3)]


def test_fix_applies_exactly_the_fixes_check_attached() -> None:
    diagnostics = _checked(TWO_BLOCKS)
    edits = tuple(e for d in diagnostics if d.fix is not None for e in d.fix.edits)
    expected = apply_text_edits(TWO_BLOCKS.encode(), edits)
    result = fix_source(TWO_BLOCKS.encode(), "m.py", FixSettings(select=SELECT))
    assert not result.errors
    assert result.fixed == expected
    assert result.left == [] and {e.fixer for e in result.edits} == {"OFL204"}


def test_one_loop_check_apply_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fix` on a two-finding file: one check attaches both fixes, one re-check finds nothing to
    attach. No fixer runs outside `check`."""
    calls: list[bytes] = []
    real = engine.check_source

    def counting(data: bytes, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(data)
        return real(data, *args, **kwargs)

    monkeypatch.setattr(apply_module, "check_source", counting)
    result = fix_source(TWO_BLOCKS.encode(), "m.py", FixSettings(select=SELECT))
    assert result.changed and not result.errors
    assert calls == [TWO_BLOCKS.encode(), result.fixed]


def test_a_pair_carries_one_fix() -> None:
    """The zoo's fork (OFL103) and the wait on its event (OFL101): one fix, carried by both."""
    source = (ROOT / "fixtures" / "capture_hazards_zoo.py").read_text()
    whole = FixSettings(select=SELECT, min_confidence=Confidence.MEDIUM, capture_modes=("whole",))
    diagnostics = _checked(source, whole)
    fork = next(d for d in diagnostics if d.code == "OFL103")
    wait = next(d for d in diagnostics if d.code == "OFL101")
    assert fork.fix is not None and wait.fix is not None
    assert fork.fix.edits == wait.fix.edits
