"""Static and dynamic agree, live on a GPU (issue 17, item 4): every driver of
tests/probe_agreement.py runs under the capture sanitizer; its violations must be the ones
`EXPECTED` lists (so the CPU test that checks `offlint check` against those lines tests what a
GPU sees), and each must have an `offlint check` finding with the same rule at one of its two
lines. A known gap is xfail(strict=True) with its reason."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.probe_agreement import (
    BY_NAME,
    DRIVERS,
    Expected,
    check_findings,
    compare_all,
    innermost,
    match,
    sanitized,
)

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

_RUNS: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="module", autouse=True)
def _record() -> Iterator[None]:
    """With OFFLINT_AGREEMENT_RECORD=FILE, the whole comparison is written there at the end
    (benchmarks/results/agreement-h200-*.json), from the runs the tests made."""
    yield
    target = os.environ.get("OFFLINT_AGREEMENT_RECORD")
    if target:
        compare_all(Path(target), dict(_RUNS))


def _run(name: str) -> dict[str, Any]:
    if name not in _RUNS:
        _RUNS[name] = sanitized(name)
    return _RUNS[name]


def _line_of(violation: dict[str, Any], stack: str, files: tuple[str, ...]) -> int | None:
    site = innermost(violation.get(stack), files)
    return site["line"] if site else None


@pytest.mark.parametrize("name", [driver.name for driver in DRIVERS])
def test_the_sanitizer_stops_where_expected(name: str) -> None:
    driver = BY_NAME[name]
    document = _run(name)
    assert not document.get("crashed"), document["output"]  # the driver ran to its end
    got = sorted(
        (v["rule"], _line_of(v, e.stack, driver.files))
        for v in document["violations"]
        for e in driver.expected
        if e.rule == v["rule"]
    )
    unexpected = [
        v["rule"]
        for v in document["violations"]
        if v["rule"] not in {e.rule for e in driver.expected}
    ]
    assert unexpected == [], document["output"]
    assert got == sorted((e.rule, e.line()) for e in driver.expected), document["output"]
    # The driver ran to its end: every capture it attempted was seen.
    assert document["counts"].get("CUDAGraph.capture_begin", 0) >= 1, document["output"]


def _agreement_cases() -> list[Any]:
    cases = []
    for driver in DRIVERS:
        for expected in driver.expected:
            marks = (
                [pytest.mark.xfail(strict=True, reason=f"known gap: {expected.gap}")]
                if expected.gap
                else []
            )
            cases.append(
                pytest.param(
                    driver.name, expected, id=f"{driver.name}-{expected.rule}", marks=marks
                )
            )
    return cases


@pytest.mark.parametrize(("name", "expected"), _agreement_cases())
def test_check_has_the_violation(name: str, expected: Expected) -> None:
    pytest.importorskip("libcst", reason="offlint check needs libcst")
    driver = BY_NAME[name]
    violations = [v for v in _run(name)["violations"] if v["rule"] == expected.rule]
    assert violations, _run(name)["output"]
    result = match(violations[0], check_findings(driver.files), driver.files)
    assert result["matched_by"] is not None, result
