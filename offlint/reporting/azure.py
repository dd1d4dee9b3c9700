"""`--output-format azure`: Azure Pipelines logging commands (ruff's `azure`), one
`##vso[task.logissue ...]` line per finding and per file that could not be checked."""

from __future__ import annotations

from pathlib import Path

from offlint.diagnostics import RunReport
from offlint.reporting._sources import display_path


def _value(text: str) -> str:
    # the logging command's own escapes: `;` and `]` end a property, `%`, CR and LF break the line
    return (
        text.replace("%", "%AZP25").replace(";", "%3B").replace("]", "%5D").replace("\r", "%0D").replace("\n", "%0A")
    )


def _message(text: str) -> str:
    return text.replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A")


def _issue(path: str, line: int | None, column: int | None, code: str, message: str) -> str:
    where = "" if not line else f"linenumber={line};" + (f"columnnumber={column};" if column else "")
    return f"##vso[task.logissue type=error;sourcepath={_value(path)};{where}code={code};]{_message(message)}\n"


def render_azure(report: RunReport, *, root: Path) -> str:
    issues = [
        _issue(
            display_path(d.path, root),
            d.location.line,
            d.location.column,
            d.code,
            d.message if d.cell is None else f"cell {d.cell}: {d.message}",
        )
        for d in report.diagnostics
    ]
    issues += [_issue(display_path(e.path, root), e.line, e.column, e.kind.value, e.message) for e in report.all_errors]
    return "".join(issues)
