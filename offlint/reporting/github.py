"""`--output-format github`: GitHub Actions workflow commands, one `::error` line per diagnostic.

    ::error file=pkg/offload.py,line=12,col=9,endLine=12,endColumn=16,title=OFL101::message

`file` is relative to the repository root (git's top level, else the project root), whatever
folder offlint runs in: GitHub attaches annotations by repository path, so a job with a
`working-directory:` still annotates the right lines. Files that could not be checked are annotated too (title is the error kind), so a CI run that
skipped a file says so on the pull request. Escaping follows the runner's toolkit
(`@actions/core` command.ts): in the message `%`, CR and LF; in property values also `:` and `,`.
"""

from __future__ import annotations

from pathlib import Path

from offlint.diagnostics import Confidence, RunReport
from offlint.reporting._sources import path_from, repository_root


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(properties: dict[str, object], message: str, command: str = "error") -> str:
    joined = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{command} {joined}::{escape_data(message)}\n"


# a finding's confidence picks the annotation: what capture surely reaches fails the check's look
_COMMAND = {Confidence.HIGH: "error", Confidence.MEDIUM: "warning", Confidence.LOW: "notice"}


def render_github(report: RunReport, *, root: Path, project_root: Path | None = None) -> str:
    """`root` is the folder the report's relative paths start from (the working directory)."""
    base = repository_root(root.resolve(), project_root)
    lines: list[str] = []
    for diagnostic in report.diagnostics:
        where = diagnostic.location
        properties: dict[str, object] = {
            "file": path_from(diagnostic.path, root, base),
            "line": where.line,
            "col": where.column,
            "endLine": where.end_line,
            "endColumn": where.end_column,
            "title": diagnostic.code,
        }
        # a notebook's rows are its cell's, which the annotation cannot express: the message says
        message = diagnostic.message if diagnostic.cell is None else f"cell {diagnostic.cell}: {diagnostic.message}"
        lines.append(_command(properties, message, _COMMAND[diagnostic.confidence]))
    for error in report.all_errors:
        properties = {"file": path_from(error.path, root, base)}
        if error.line:
            properties["line"] = error.line
            if error.column:
                properties["col"] = error.column
        properties["title"] = f"offlint {error.kind.value}"
        lines.append(_command(properties, error.message))
    return "".join(lines)
