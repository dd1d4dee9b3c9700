"""Golden tests of `offlint fix`: in.py -> out_<strategy>.py (or out.py), reviewed by hand.

For every case: fixing in.py gives exactly the golden bytes; fixing the golden output changes
nothing (idempotence); the output compiles; `offlint check` reports no fixable diagnostic on it.
The hand-written capture-aware fixtures are left alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.diagnostics import Confidence
from offlint.fixing.apply import FIXABLE_RULES, FixSettings
from offlint.fixing.loop import fix_source

# these tests fix for an engine that captures whole forwards (`capture-modes = ["whole"]`):
# the rewrites the split capture modes defeat are offered only there (fixing/capture_modes.py)
WHOLE = ("whole",)


ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "fixtures" / "golden"
# cases whose input is a live fixture (the probe runs it too), not a copy in the case folder
LIVE_INPUTS = {
    "sglang_original": ROOT / "fixtures" / "sglang_offloader_original.py",
    "sglang_merged_inline": ROOT / "fixtures" / "sglang_offloader_inline.py",
}


def _input(case: str) -> bytes:
    return LIVE_INPUTS.get(case, GOLDEN / case / "in.py").read_bytes()


SELECT = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)


def _cases() -> list[tuple[str, str, Path]]:
    found = []
    for case in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        for out in sorted(case.glob("out*.py")):
            strategy = out.stem.removeprefix("out_") if out.stem != "out" else "auto"
            found.append((case.name, strategy, out))
    return found


CASES = _cases()


def _fix(data: bytes, strategy: str = "auto", path: str = "in.py") -> bytes:
    result = fix_source(data, path, FixSettings(select=SELECT, strategy=strategy, min_confidence=Confidence.LOW, capture_modes=WHOLE))
    assert not result.errors, result.errors
    return result.fixed


@pytest.mark.parametrize(("case", "strategy", "out"), CASES, ids=[f"{c}-{s}" for c, s, _ in CASES])
def test_golden_output(case: str, strategy: str, out: Path) -> None:
    assert _fix(_input(case), strategy) == out.read_bytes()


@pytest.mark.parametrize(("case", "strategy", "out"), CASES, ids=[f"{c}-{s}" for c, s, _ in CASES])
def test_golden_output_is_a_fixed_point(case: str, strategy: str, out: Path) -> None:
    data = out.read_bytes()
    assert _fix(data, strategy) == data
    # and no other strategy finds anything left to do either
    assert _fix(data, "auto") == data


@pytest.mark.parametrize(("case", "strategy", "out"), CASES, ids=[f"{c}-{s}" for c, s, _ in CASES])
def test_golden_output_compiles_and_checks_clean(case: str, strategy: str, out: Path) -> None:
    data = out.read_bytes()
    compile(data, str(out), "exec")
    report = check_source(data, str(out), FileSettings(select=SELECT))
    assert not report.errors
    assert [d for d in report.diagnostics if d.fixable] == []


def test_every_case_changes_something() -> None:
    for case, strategy, out in CASES:
        assert _input(case) != out.read_bytes(), (case, strategy)


def test_merged_upstream_fix_is_rewritten_like_the_original() -> None:
    """The merged fix's capturing branches are dropped and replaced: with the overlap strategy
    both inputs end up as the same code (the module docstrings differ)."""

    def body(path: Path) -> list[str]:
        return [ast.dump(stmt) for stmt in ast.parse(path.read_bytes()).body[1:]]

    original = body(GOLDEN / "sglang_original" / "out_overlap.py")
    merged = body(GOLDEN / "sglang_merged_inline" / "out_overlap.py")
    assert original == merged


@pytest.mark.parametrize(
    "name", ["sglang_offloader_inline_fixed.py", "sglang_offloader_overlap.py"]
)
def test_hand_written_capture_aware_fixtures_are_left_alone(name: str) -> None:
    path = ROOT / "fixtures" / name
    if not path.exists():
        pytest.skip(f"{name} not written yet")
    data = path.read_bytes()
    assert _fix(data) == data
    assert _fix(data, "inline") == data
