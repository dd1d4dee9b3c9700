"""`--output-format full` (the default): ruff-style code frames, rendered by rich into a string.

    fixtures/offload.py:12:9: OFL101 [*] `.cpu()` copies to the host during capture
       |
    11 |     def forward(self, x):
    12 |         y = x.cpu()
       |             ^^^^^^^ OFL101
    13 |         return y
       |
       = help: Keep the tensor on the device

The frame comes from the file on disk (or a path -> text mapping); when that cannot be read the
line the engine kept in `Diagnostic.source_line` is shown alone, and with neither, no frame.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

from offlint.diagnostics import Confidence, Diagnostic, RunReport
from offlint.reporting._sources import SourceCache, display_path
from offlint.reporting.concise import FIXABLE_MARKER

CONTEXT_LINES = 2
# tabs are expanded by us, not by rich, so carets line up with what is printed
TAB_SIZE = 4
# a span over many lines is shown up to this many lines; its start is what the caret marks
MAX_SPAN_LINES = 6

STYLE_PATH = "bold"
STYLE_CODE = "bold red"
STYLE_GUTTER = "bold blue"
STYLE_CARET = "bold red"
STYLE_HELP = "bold cyan"


@dataclass(frozen=True)
class _Frame:
    first_line: int
    lines: list[str]  # tabs already expanded
    caret_line: int
    caret_start: int  # 0-based display column
    caret_width: int


def _expand(text: str) -> str:
    return text.expandtabs(TAB_SIZE)


def _caret(line: str, column: int, end_column: int | None) -> tuple[int, int]:
    """Display start and width of the caret under `line` for 1-based [column, end_column)."""
    start = len(_expand(line[: max(column - 1, 0)]))
    stop = (
        len(_expand(line.rstrip())) if end_column is None else len(_expand(line[: end_column - 1]))
    )
    return start, max(stop - start, 1)


def _frame(diagnostic: Diagnostic, sources: SourceCache) -> _Frame | None:
    where = diagnostic.location
    end_column = where.end_column if where.end_line == where.line else None
    lines = sources.lines(diagnostic.path, diagnostic.cell)
    if lines is None or not 1 <= where.line <= len(lines):
        # the file is gone or changed: fall back to the line kept at analysis time
        kept = diagnostic.source_line.splitlines()
        if not kept:
            return None
        start, width = _caret(kept[0], where.column, end_column)
        return _Frame(where.line, [_expand(kept[0])], where.line, start, width)
    last = min(max(where.end_line, where.line), where.line + MAX_SPAN_LINES - 1)
    first_shown = max(where.line - CONTEXT_LINES, 1)
    last_shown = min(last + CONTEXT_LINES, len(lines))
    start, width = _caret(lines[where.line - 1], where.column, end_column)
    shown = [_expand(line) for line in lines[first_shown - 1 : last_shown]]
    return _Frame(first_shown, shown, where.line, start, width)


def _render_one(diagnostic: Diagnostic, frame: _Frame | None, root: Path, show_fixes: bool) -> Text:
    out = Text()
    out.append(display_path(diagnostic.path, root), style=STYLE_PATH)
    out.append(f":{diagnostic.position}: ")
    out.append(diagnostic.code, style=STYLE_CODE)
    out.append(" ")
    if show_fixes and diagnostic.fixable:
        out.append(FIXABLE_MARKER + " ", style=STYLE_HELP)
    out.append(diagnostic.message)
    out.append("\n")
    gutter_width = len(str(frame.first_line + len(frame.lines) - 1)) if frame else 1
    blank_gutter = " " * gutter_width + " |"
    if frame is not None:
        out.append(blank_gutter + "\n", style=STYLE_GUTTER)
        for offset, line in enumerate(frame.lines):
            number = frame.first_line + offset
            out.append(f"{number:>{gutter_width}} |", style=STYLE_GUTTER)
            out.append((" " + line).rstrip() + "\n")
            if number == frame.caret_line:
                out.append(blank_gutter, style=STYLE_GUTTER)
                out.append(" " + " " * frame.caret_start)
                out.append("^" * frame.caret_width + " " + diagnostic.code, style=STYLE_CARET)
                out.append("\n")
        out.append(blank_gutter + "\n", style=STYLE_GUTTER)
    # the confidence is said when it is below high, as in the concise view
    tier = None if diagnostic.confidence is Confidence.HIGH else diagnostic.confidence.value
    footer = (("help", diagnostic.fix_title), ("note", diagnostic.note), ("confidence", tier))
    for label, text in footer:
        if text:
            out.append(" " * gutter_width + " = ")
            out.append(label, style=STYLE_HELP)
            out.append(f": {text}\n")
    return out


def make_console(color: bool) -> tuple[Console, io.StringIO]:
    """A console writing into a string; with color=False it emits no escape codes at all."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        width=1_000_000,  # never wrap: a frame's lines must stay one line each
        soft_wrap=True,
        highlight=False,
        markup=False,
        emoji=False,
        legacy_windows=False,
    )
    return console, buffer


def render_full(
    report: RunReport,
    *,
    root: Path,
    color: bool,
    show_fixes: bool = True,
    sources: Mapping[str, str] | None = None,
) -> str:
    cache = SourceCache(root, sources)
    console, buffer = make_console(color)
    for index, diagnostic in enumerate(report.diagnostics):
        if index:
            console.print()
        rendered = _render_one(diagnostic, _frame(diagnostic, cache), root, show_fixes)
        rendered.rstrip()
        console.print(rendered)
    return buffer.getvalue()
