"""Every module under fixtures/ through the real engine, with every rule selected.

A fixture marks each line it expects a diagnostic on with a trailing `# expect: OFLnnn` comment
(several codes allowed: `# expect: OFL101, OFL103`); the (line, code) pairs found must equal the
marked ones exactly - a missing diagnostic and an unmarked one both fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import EXPECT_MARKER, load_catalogue

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FILES = sorted(p for p in FIXTURES.rglob("*.py") if "golden" not in p.relative_to(FIXTURES).parts)


def expected(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = EXPECT_MARKER.search(line)
        if match:
            found.extend((number, code) for code in re.findall(r"OFL\d{3}", match.group(1)))
    return sorted(found)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture_diagnostics_match_markers(path: Path) -> None:
    data = path.read_bytes()
    report = check_source(data, str(path), FileSettings(select=frozenset(load_catalogue())))
    assert not report.errors, report.errors
    found = sorted((d.location.line, d.code) for d in report.diagnostics)
    assert found == expected(data.decode("utf-8"))


def test_fixtures_exist() -> None:
    assert FILES
