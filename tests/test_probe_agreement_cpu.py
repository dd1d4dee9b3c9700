"""Static and dynamic agree, without a GPU (issue 17, item 4): `offlint check` must report
every violation the capture sanitizer stops at on the H200 (tests/probe_agreement.py's
`EXPECTED`, recorded in benchmarks/results/agreement-h200-*.json) with the same rule at the same
line; a known gap is xfail(strict=True) with its reason, so closing it is noticed too."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.probe_agreement import DRIVERS, REPO, Expected, check_findings, match

pytest.importorskip("libcst")

RESULTS = sorted((REPO / "benchmarks" / "results").glob("agreement-h200-*-sanitizer-vs-check.json"))


@pytest.fixture(scope="module")
def findings() -> list[dict[str, Any]]:
    return check_findings(sorted({file for driver in DRIVERS for file in driver.files}))


def _cases() -> list[Any]:
    return [
        pytest.param(
            expected,
            id=f"{driver.name}-{expected.rule}",
            marks=[pytest.mark.xfail(strict=True, reason=f"known gap: {expected.gap}")]
            if expected.gap
            else [],
        )
        for driver in DRIVERS
        for expected in driver.expected
    ]


@pytest.mark.parametrize("expected", _cases())
def test_check_reports_what_the_sanitizer_stops_at(
    expected: Expected, findings: list[dict[str, Any]]
) -> None:
    line = expected.line()
    hits = [
        f
        for f in findings
        if f["code"] == expected.rule
        and f["filename"] == expected.file
        and f["location"]["row"] == line
    ]
    assert hits, f"no {expected.rule} at {expected.file}:{line}"


def test_the_comparison_matches_either_line_of_the_pair() -> None:
    files = ("fixtures/x.py",)
    violation = {
        "rule": "OFL103",
        "here": [{"file": "tests/driver.py", "line": 5}],
        "other": [{"file": "lib/elsewhere.py", "line": 1}, {"file": "fixtures/x.py", "line": 47}],
    }
    finding = {
        "code": "OFL103",
        "filename": "fixtures/x.py",
        "location": {"row": 47},
        "message": "m",
        "confidence": "medium",
    }
    result = match(violation, [finding], files)
    assert result["matched_by"] == "other"
    assert result["pair"]["other"]["line"] == 47
    wrong_rule = {**finding, "code": "OFL101"}
    missed = match(violation, [wrong_rule], files)
    assert missed["matched_by"] is None and missed["same_rule_elsewhere"] == []


def test_the_h200_record_is_what_expected_lists() -> None:
    assert RESULTS, "no benchmarks/results/agreement-h200-*-sanitizer-vs-check.json"
    record = json.loads(RESULTS[-1].read_text())
    recorded = {d["driver"]: d for d in record["drivers"]}
    assert set(recorded) == {driver.name for driver in DRIVERS}
    for driver in DRIVERS:
        rules = sorted(v["rule"] for v in recorded[driver.name]["violations"])
        assert rules == sorted(e.rule for e in driver.expected), driver.name
    gaps = sorted((g["driver"], g["rule"]) for g in record["gaps"])
    known = sorted((d.name, e.rule) for d in DRIVERS for e in d.expected if e.gap)
    assert gaps == known
