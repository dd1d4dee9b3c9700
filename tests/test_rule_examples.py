"""Every rule's bad and good examples from rules/*.toml, run through the real engine.

Bad examples must produce exactly the diagnostics their `# expect: CODE` markers name (for the
rule itself; other rules may not fire either unless marked), good examples none at all.
"""

from __future__ import annotations

import pytest

from offlint.analysis.engine import FileSettings, check_source
from offlint.analysis.rules import all_rules
from offlint.catalogue import DOC_SECTIONS, RuleExample, load_catalogue

CATALOGUE = load_catalogue()
EXAMPLES = [ex for spec in CATALOGUE.values() for ex in (*spec.bad, *spec.good)]


def _check(example: RuleExample) -> list[tuple[int, str]]:
    select = frozenset(CATALOGUE)  # every rule, including those off by default
    patterns = tuple(str(p) for p in example.config.get("capture-reachable", []))  # type: ignore[union-attr]
    report = check_source(
        example.code.encode(), f"{example.id}.py", FileSettings(select=select, capture_reachable=patterns)
    )
    assert not report.errors, report.errors
    return sorted((d.location.line, d.code) for d in report.diagnostics)


@pytest.mark.parametrize("example", EXAMPLES, ids=[ex.id for ex in EXAMPLES])
def test_example(example: RuleExample) -> None:
    found = _check(example)
    if example.kind == "bad":
        expected = sorted(example.expected())
        assert any(code == example.rule for _, code in expected), "bad example marks no line"
        assert found == expected
    else:
        assert found == []


@pytest.mark.parametrize("code", list(CATALOGUE))
def test_rule_is_complete(code: str) -> None:
    spec = CATALOGUE[code]
    assert code in all_rules(), f"{code} has docs but no implementation"
    assert len(spec.bad) >= 3 and len(spec.good) >= 3
    for section in DOC_SECTIONS:
        assert spec.docs.get(section, "").strip(), f"{code}: docs section {section!r} is empty"
    assert spec.prevents
    if spec.fix_safety.value != "none":
        assert spec.fix_title


def test_every_implemented_rule_has_a_catalogue_file() -> None:
    assert set(all_rules()) <= set(CATALOGUE)
