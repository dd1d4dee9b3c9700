"""Every rule's bad and good examples from rules/*.toml, run through the real engine.

Bad examples must produce exactly the diagnostics their `# expect: CODE` markers name (for the
rule itself; other rules may not fire either unless marked), good examples none at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offlint import catalogue as catalogue_module
from offlint.analysis.engine import FileSettings, check_source
from offlint.analysis.rules import all_rules
from offlint.catalogue import (
    DOC_SECTIONS,
    RuleExample,
    catalogue_dir,
    default_selection,
    load_catalogue,
)

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


def test_selection_heads_agree_with_the_full_catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`default_selection` reads only each rule file's head; it must say what the full parse says,
    and a head it cannot parse alone is read whole."""
    assert default_selection() == {code: spec.default_enabled for code, spec in CATALOGUE.items()}
    # a rule file whose head does not parse on its own (a multi-line string holding a line that
    # looks like a table header) falls back to the full read
    odd = tmp_path / "OFL999.toml"
    source = (catalogue_dir() / "OFL101.toml").read_text(encoding="utf-8")
    source = source.replace('code = "OFL101"', 'code = "OFL999"\nnote = """\n[not a table]\n"""\ndefault_enabled = false', 1)
    odd.write_text(source, encoding="utf-8")
    monkeypatch.setattr(catalogue_module, "catalogue_dir", lambda: tmp_path)
    default_selection.cache_clear()
    try:
        assert default_selection() == {"OFL999": False}
    finally:
        monkeypatch.undo()
        default_selection.cache_clear()
