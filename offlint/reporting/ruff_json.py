"""`--output-format json`: ruff's JSON, a list with one object per diagnostic, so tools that read
`ruff check --output-format json` read offlint's. Keys (sorted, as ruff writes them): `cell`,
`code`, `end_location`, `filename` (absolute, as ruff's), `fix` (`applicability`, `edits`,
`message`, or null), `location` (`row`, `column`, 1-based), `message`, `noqa_row`, `url` (the
rule's page, `links.rule_url`). A file that could not be checked is an entry with `code: null`
(as ruff reports a syntax error). offlint's own object, with confidence, notes and a summary, is
`--output-format offlint-json` (`json_format.py`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from offlint.diagnostics import Diagnostic, FileError, RunReport
from offlint.links import rule_url
from offlint.reporting._sources import printable
from offlint.reporting.json_format import dumps, edit_object


def _absolute(path: str, root: Path) -> str:
    return printable(os.path.normpath(os.path.join(root, path)))


def _diagnostic(diagnostic: Diagnostic, root: Path, docs_url: str | None) -> dict[str, Any]:
    where = diagnostic.location
    fix = None
    if diagnostic.fixable:
        fix = {
            "applicability": diagnostic.fix_safety.value,
            "edits": [edit_object(edit) for edit in diagnostic.fix.edits] if diagnostic.fix else [],
            "message": diagnostic.fix_title or "",
        }
    return {
        "cell": diagnostic.cell,
        "code": diagnostic.code,
        "end_location": {"column": where.end_column, "row": where.end_line},
        "filename": _absolute(diagnostic.path, root),
        "fix": fix,
        "location": {"column": where.column, "row": where.line},
        "message": diagnostic.message,
        "noqa_row": where.line,
        "url": rule_url(diagnostic.code, docs_url),
    }


def _error(error: FileError, root: Path) -> dict[str, Any]:
    row, column = error.line or 1, error.column or 1
    return {
        "cell": error.cell,
        "code": None,
        "end_location": {"column": column, "row": row},
        "filename": _absolute(error.path, root),
        "fix": None,
        "location": {"column": column, "row": row},
        "message": f"{error.kind.value}: {error.message}",
        "noqa_row": None,
        "url": None,
    }


def render_ruff_json(report: RunReport, *, root: Path, docs_url: str | None = None) -> str:
    entries = [_diagnostic(d, root, docs_url) for d in report.diagnostics]
    entries += [_error(e, root) for e in report.all_errors]
    return dumps(entries)
