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


def render_azure(report: RunReport, *, root: Path) -> str:
    lines = []
    for d in report.diagnostics:
        cell = "" if d.cell is None else f"cell {d.cell}: "
        lines.append(
            f"##vso[task.logissue type=error;sourcepath={_value(display_path(d.path, root))};"
            f"linenumber={d.location.line};columnnumber={d.location.column};code={d.code};]"
            f"{_message(cell + d.message)}"
        )
    for e in report.all_errors:
        where = f"linenumber={e.line};" if e.line else ""
        where += f"columnnumber={e.column};" if e.line and e.column else ""
        lines.append(
            f"##vso[task.logissue type=error;sourcepath={_value(display_path(e.path, root))};{where}"
            f"code={e.kind.value};]{_message(e.message)}"
        )
    return "".join(line + "\n" for line in lines)
