"""The same hazard written the everyday ways offloader authors write it (issue: "offlint check
finds a hazard however it is spelled"). Each file in tests/data/spellings marks the findings it must
give at the default confidence floor with `# expect: CODE`; a file with no marker must be clean.
Each is a fact the analysis needed, not a special case: an untyped receiver resolved to the
classes defining the method, a helper handed a stored event, a method inherited from a base
class, streams in a dict, `torch.cuda.set_stream`, a stream saved at construction, ...
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import default_selection
from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE

DATA = Path(__file__).parent / "data" / "spellings"
CASES = sorted(DATA.glob("*.py"))
DEFAULT = frozenset(code for code, on in default_selection().items() if on)
_EXPECT = re.compile(r"#\s*expect:\s*(OFL\d{3})")


def _expected(text: str) -> list[tuple[int, str]]:
    return sorted(
        (number, code) for number, line in enumerate(text.splitlines(), 1) for code in _EXPECT.findall(line)
    )


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_spelling_keeps_its_findings(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    report = check_source(text.encode(), path.name, FileSettings(select=DEFAULT))
    assert not report.errors, report.errors
    found = sorted(
        (d.location.line, d.code) for d in report.diagnostics if d.confidence.rank >= DEFAULT_MIN_CONFIDENCE.rank
    )
    assert found == _expected(text)


def test_untyped_receiver_names_its_candidates() -> None:
    text = (DATA / "a_untyped.py").read_text(encoding="utf-8")
    report = check_source(text.encode(), "a_untyped.py", FileSettings(select=frozenset({"OFL101"})))
    [finding] = report.diagnostics
    assert "receiver of unknown type: Prefetcher.get" in (finding.note or "")
