"""Every fixable case of every blind round (corpus/blind/*/cases, written by annotators who never
saw offlint): `fix` at the lowest floor, under every capture mode (the default) and for whole
forwards, gives text that compiles, is a fixed point, and re-checks with no finding the original
did not have (the fix's own code is never a finding); every finding left says why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.diagnostics import Confidence, Diagnostic
from offlint.fixing.apply import FIXABLE_RULES, FixSettings
from offlint.fixing.loop import fix_source

ROOT = Path(__file__).resolve().parent.parent
CASES = sorted((ROOT / "corpus" / "blind").glob("*/cases/*.py"))
SELECT = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)
MODES = {"all-modes": None, "whole": ("whole",)}


def _key(d: Diagnostic) -> tuple[str, str]:
    return d.code, re.sub(r"\d+", "#", d.message)  # the same finding on other lines


@pytest.mark.parametrize("modes", MODES, ids=list(MODES))
@pytest.mark.parametrize("case", CASES, ids=[f"{p.parent.parent.name}/{p.name}" for p in CASES])
def test_fix_of_a_blind_case(case: Path, modes: str) -> None:
    named = MODES[modes]
    settings = FixSettings(
        select=SELECT, min_confidence=Confidence.LOW, **({"capture_modes": named} if named else {})
    )
    data = case.read_bytes()
    first = fix_source(data, case.name, settings)
    assert not first.errors, [e.one_line() for e in first.errors]
    explained = {(n.diagnostic.code, n.diagnostic.location.line) for n in first.not_fixed if n.reason.strip()}
    unexplained = [
        (d.code, d.location.line) for d in first.left if d.code in FIXABLE_RULES and (d.code, d.location.line) not in explained
    ]
    assert unexplained == [], "a finding of a fixable rule left without its reason"
    if not first.changed:
        return
    compile(first.fixed, case.name, "exec")
    again = fix_source(first.fixed, case.name, settings)
    assert not again.changed, "not a fixed point"
    check = FileSettings(select=SELECT, min_confidence=Confidence.LOW)
    original = {_key(d) for d in check_source(data, case.name, check).diagnostics}
    new = [d for d in check_source(first.fixed, case.name, check).diagnostics if _key(d) not in original]
    assert new == [], [(d.code, d.location.line, d.message) for d in new]
