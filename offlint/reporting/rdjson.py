"""`--output-format rdjson`: reviewdog's Diagnostic Format (ruff's `rdjson`): one document with a
`diagnostics` list; each has the rule as `code` (`value`, `url`), the location as a `range`
(1-based, end exclusive) and the fix's edits as `suggestions`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offlint.diagnostics import Diagnostic, RunReport
from offlint.links import docs_base, rule_url
from offlint.reporting._sources import display_path
from offlint.reporting.json_format import dumps


def _range(line: int, column: int, end_line: int, end_column: int) -> dict[str, Any]:
    return {"start": {"line": line, "column": column}, "end": {"line": end_line, "column": end_column}}


def _diagnostic(d: Diagnostic, root: Path, docs_url: str | None) -> dict[str, Any]:
    where = d.location
    code: dict[str, Any] = {"value": d.code}
    url = rule_url(d.code, docs_url)
    if url is not None:
        code["url"] = url
    entry: dict[str, Any] = {
        "message": d.message if d.cell is None else f"cell {d.cell}: {d.message}",
        "location": {
            "path": display_path(d.path, root),
            "range": _range(where.line, where.column, where.end_line, where.end_column),
        },
        "code": code,
        "severity": "ERROR",
    }
    if d.fix is not None and d.fix.edits:
        entry["suggestions"] = [
            {"range": _range(e.line, e.column, e.end_line, e.end_column), "text": e.content} for e in d.fix.edits
        ]
    return entry


def render_rdjson(report: RunReport, *, root: Path, docs_url: str | None = None) -> str:
    diagnostics = [_diagnostic(d, root, docs_url) for d in report.diagnostics]
    for e in report.all_errors:
        location: dict[str, Any] = {"path": display_path(e.path, root)}
        if e.line:
            location["range"] = _range(e.line, e.column or 1, e.line, e.column or 1)
        diagnostics.append(
            {"message": e.message, "location": location, "code": {"value": e.kind.value}, "severity": "ERROR"}
        )
    source: dict[str, Any] = {"name": "offlint"}
    base = docs_base(docs_url)
    if base is not None:
        source["url"] = base + "/index.md"
    return dumps({"source": source, "severity": "ERROR", "diagnostics": diagnostics})
