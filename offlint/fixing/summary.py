"""What `fix` hands libcst: the file with its long literal tables summarised, and the way back.

libcst's tree costs about 1 000 bytes per character of a literal table (a 0.1 MB table module
cost `fix` 128 MB, a 1 MB one was refused as too large). A table holds no stream code, so the
fixers never need it: they plan on the file with its table rows emptied
(`prefilter.blank_literal_tables`: same line numbers, same columns everywhere else), and the
result is put back together with the original rows. A fix that would change, remove or insert
lines inside a table is refused (the rows it would touch are not in the text it planned on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from offlint.analysis.guard import compile_quietly
from offlint.analysis.prefilter import blank_literal_rows, blank_literal_tables, literal_table_runs
from offlint.fixing.line_diff import changed_blocks


@dataclass(frozen=True)
class Summary:
    """The file's bytes and text with the rows of `runs` (0-based [first, end) lines) emptied."""

    data: bytes
    text: str
    runs: tuple[tuple[int, int], ...]


def summarise(data: bytes, text: str) -> Summary | None:
    """The summary of a file holding long literal tables, or None (none, or a text that does not
    compile without its rows: libcst then parses the file itself, within its budget)."""
    runs = literal_table_runs(text)
    if not runs or data.count(b"\n") != text.count("\n"):
        return None
    light = blank_literal_tables(text, runs)
    try:
        compile_quietly(light)
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
        return None
    return Summary(blank_literal_rows(data, runs), light, tuple(runs))


def restore(summary: Summary, original: bytes, fixed: bytes) -> bytes | None:
    """`fixed` (the fixers' output on `summary.data`) with the original table rows back in place;
    None when a change touches a table's lines (it cannot be mapped onto the original)."""
    before = summary.data.split(b"\n")
    after = fixed.split(b"\n")
    rows = original.split(b"\n")
    if len(rows) != len(before):
        return None
    # the Myers diff compares lines with ==: bytes lines work as str lines do
    blocks = changed_blocks(cast(list[str], before), cast(list[str], after))
    out: list[bytes] = []
    kept = 0  # the next line of `before` not yet written
    for first, last, start, end in blocks:
        for low, high in summary.runs:
            if (first < high and last > low) or low < first < high:
                return None  # it replaces or removes table rows, or inserts between them
        out += rows[kept:first]  # unchanged lines: the original's, rows included
        out += after[start:end]
        kept = last
    out += rows[kept:]
    return b"\n".join(out)


def table_lines(summary: Summary) -> str:
    """The tables' lines, 1-based, for messages (`120-1 840`)."""
    return ", ".join(f"{low + 1}-{high}" for low, high in summary.runs)
