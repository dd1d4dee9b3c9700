"""The hand-written cases of each blind set (corpus/blind/<round>/cases.toml, or markers in the
cases themselves), scored as
`python -m benchmarks.blind <round> --cases-only` scores them, held at the score they reached.
The first score of each set, taken once before it was used for anything, is recorded in
benchmarks/results/blind-<round>-first-score-*.txt; these floors only keep later changes from
losing what was gained."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.blind import evaluate

BLIND = Path(__file__).resolve().parent.parent / "corpus" / "blind"
# (recall, precision) floors of the cases at the default confidence
FLOORS = {
    "2026-12-05-a": (0.67, 0.95),
    "2026-12-05-b": (0.85, 1.0),
    "2026-12-05-c": (0.68, 0.73),
    "2026-12-05-d": (0.86, 0.86),
    # first score (cases 67.6 % / 85.2 %) at 3636ca0: benchmarks/results/blind-2026-12-07-e-first-score-at-3636ca0.txt
    "2026-12-07-e": (0.67, 0.85),
}


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_blind_cases_keep_their_score(name: str) -> None:
    _, result = evaluate(BLIND / name, cases_only=True)
    assert not result.errors, result.errors
    recall, precision = FLOORS[name]
    assert result.total.expects >= 15
    assert result.total.recall >= recall, result.false_negatives
    assert result.total.precision >= precision, result.false_positives


def test_every_blind_set_has_a_floor() -> None:
    assert {p.name for p in BLIND.iterdir() if p.is_dir()} <= set(FLOORS)
