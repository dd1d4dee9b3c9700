"""`fix` on a file with a large literal costs a few passes over it, not one per fixer (issue 15:
a 300 kB literal took 17 s of CPU where `check` takes 2 s; the file was parsed anew for every
fixer of every round, and applying a plan walked every element of the literal).

Counted, not timed: the machine running the tests may be shared.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from offlint.catalogue import load_catalogue
from offlint.fixing import edits
from offlint.fixing.apply import FixSettings
from offlint.fixing.loop import fix_source

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sglang_offloader_original.py"
ELEMENTS = 20_000  # about 130 kB of list literal
LITERAL = "\n\n_DATA = [" + ", ".join(str(i) for i in range(ELEMENTS)) + "]\n"


@pytest.fixture(scope="module")
def settings() -> FixSettings:
    return FixSettings(select=frozenset(load_catalogue()))


def test_a_large_literal_is_parsed_twice_and_never_walked(
    settings: FixSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = FIXTURE.read_bytes() + LITERAL.encode()
    big_parses = 0
    parse = cst.parse_module

    def counting_parse(source: str | bytes, *args: object, **kwargs: object) -> cst.Module:
        nonlocal big_parses
        if len(source) >= len(LITERAL):
            big_parses += 1
        return parse(source, *args, **kwargs)  # type: ignore[arg-type]

    visited = 0
    leave = edits._PlanApplier.on_leave

    def counting_leave(self: edits._PlanApplier, original: cst.CSTNode, updated: cst.CSTNode) -> object:
        nonlocal visited
        visited += 1
        return leave(self, original, updated)

    monkeypatch.setattr(cst, "parse_module", counting_parse)
    monkeypatch.setattr(edits._PlanApplier, "on_leave", counting_leave)
    fixed = fix_source(data, "big_literal.py", settings)

    assert fixed.errors == [] and fixed.changed, fixed.errors
    # the original once, to plan the fixes its findings carry; the fixed text is re-checked with
    # CPython's parser, and libcst parses it only if a finding there offers a fix (it was 9
    # parses, then 2)
    assert big_parses == 1
    # applying a plan walks statements, not the literal's 20 000 elements (it was every node)
    assert 0 < visited < ELEMENTS // 4


def test_the_fix_of_a_file_with_a_large_literal_is_the_fix_without_it(settings: FixSettings) -> None:
    alone = fix_source(FIXTURE.read_bytes(), "offloader.py", settings)
    with_literal = fix_source(FIXTURE.read_bytes() + LITERAL.encode(), "offloader.py", settings)
    assert alone.changed and alone.errors == [] and with_literal.errors == []
    assert with_literal.fixed == alone.fixed + LITERAL.encode()
    assert [(e.rule, e.line, e.fixer) for e in with_literal.edits] == [(e.rule, e.line, e.fixer) for e in alone.edits]
