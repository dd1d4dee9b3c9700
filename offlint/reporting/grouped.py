"""`--output-format grouped`: ruff's grouped view, the file named once and its findings indented
below it (`  line:col CODE [*] message`), a blank line after each file."""

from __future__ import annotations

from itertools import groupby
from pathlib import Path

from offlint.diagnostics import Confidence, RunReport
from offlint.reporting._sources import display_path
from offlint.reporting.concise import FIXABLE_MARKER


def render_grouped(report: RunReport, *, root: Path, show_fixes: bool = True) -> str:
    out: list[str] = []
    for path, found in groupby(report.diagnostics, key=lambda d: d.path):
        diagnostics = list(found)
        width = max(len(d.position) for d in diagnostics)
        out.append(f"{display_path(path, root)}:\n")
        for d in diagnostics:
            marker = f"{FIXABLE_MARKER} " if show_fixes and d.fixable else ""
            tier = "" if d.confidence is Confidence.HIGH else f" [{d.confidence.value}]"
            out.append(f"  {d.position:<{width}} {d.code} {marker}{d.message}{tier}\n")
        out.append("\n")
    return "".join(out)
