"""`--output-format pylint`: `path:line: [CODE] message`, one line per diagnostic (ruff's `pylint`
format, which editors and CI parsers of pylint's `parseable` output read). In a notebook the line
is its cell's: `path:cell 2:3: [OFL101] ...`. A file that could not be checked is a line too,
`[E0001]` (pylint's code for a file it cannot parse) followed by the error kind."""

from __future__ import annotations

from pathlib import Path

from offlint.diagnostics import RunReport
from offlint.reporting._sources import display_path


def render_pylint(report: RunReport, *, root: Path) -> str:
    lines = []
    for diagnostic in report.diagnostics:
        cell = "" if diagnostic.cell is None else f"cell {diagnostic.cell}:"
        lines.append(
            f"{display_path(diagnostic.path, root)}:{cell}{diagnostic.location.line}: "
            f"[{diagnostic.code}] {diagnostic.message}"
        )
    for error in report.all_errors:
        cell = "" if error.cell is None else f"cell {error.cell}:"
        lines.append(
            f"{display_path(error.path, root)}:{cell}{error.line or 1}: [E0001] {error.kind.value}: {error.message}"
        )
    return "".join(line + "\n" for line in lines)
