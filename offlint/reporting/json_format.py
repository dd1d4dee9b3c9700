"""`--output-format json`: one JSON object, schema `offlint-json/1`.

Stable contract (fields are only ever added under the same schema name; a rename or removal
bumps it to `offlint-json/2`):

    {
      "schema": "offlint-json/1",
      "version": "<offlint version>",
      "diagnostics": [                      # ordered by (filename, row, column, code)
        {
          "code": "OFL101",
          "name": "host-sync-in-capture",   # the rule's kebab-case name
          "message": "...",
          "filename": "pkg/offload.py",     # relative to the project root, forward slashes
          "location": {"row": 12, "column": 9},        # 1-based, columns in characters
          "end_location": {"row": 12, "column": 16},   # exclusive end, like ruff and SARIF
          "fix": {"applicability": "safe" | "unsafe", "message": "<fix title>",
                  "edits": [{"content": "...", "location": {...}, "end_location": {...}}]} | null,
          "note": "capture-reachable: <why>" | null,  # rules that fire only in capture-reachable code
          "confidence": "high" | "medium" | "low",    # how capture reaches it (shared/CATALOGUE.md)
          "cell": 3 | null                  # a notebook's cell (1-based); rows are then the cell's
        }
      ],
      "errors": [                           # files that could not be checked, ordered by path
        {"filename": "...", "kind": "syntax-error", "message": "...", "row": 3 | null, "column": 7 | null,
         "cell": 2 | null}
      ],
      "summary": {"diagnostics": 3, "fixable": 2, "errors": 1, "files": 10}
    }

`fix` is null when no automatic fix applies here; its `edits` (1-based, end exclusive, whole lines)
are what `offlint fix` changes for the finding on the checked text (its first pass; a rewrite that
fixes several findings together appears on each of them). There is no `url`: rule docs are read with
`offlint rule CODE`. Keys are emitted sorted so the output is byte-for-byte deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import offlint
from offlint.diagnostics import Diagnostic, FileError, RunReport, TextEdit
from offlint.reporting._sources import display_path

SCHEMA = "offlint-json/1"


def edit_object(edit: TextEdit) -> dict[str, Any]:
    return {
        "content": edit.content,
        "location": {"row": edit.line, "column": edit.column},
        "end_location": {"row": edit.end_line, "column": edit.end_column},
    }


def diagnostic_object(diagnostic: Diagnostic, root: Path) -> dict[str, Any]:
    where = diagnostic.location
    fix = (
        {
            "applicability": diagnostic.fix_safety.value,
            "message": diagnostic.fix_title or "",
            "edits": [edit_object(edit) for edit in diagnostic.fix.edits] if diagnostic.fix else [],
        }
        if diagnostic.fixable
        else None
    )
    return {
        "code": diagnostic.code,
        "name": diagnostic.name,
        "message": diagnostic.message,
        "filename": display_path(diagnostic.path, root),
        "location": {"row": where.line, "column": where.column},
        "end_location": {"row": where.end_line, "column": where.end_column},
        "fix": fix,
        "note": diagnostic.note,
        "confidence": diagnostic.confidence.value,
        "cell": diagnostic.cell,
    }


def error_object(error: FileError, root: Path) -> dict[str, Any]:
    return {
        "filename": display_path(error.path, root),
        "kind": error.kind.value,
        "message": error.message,
        "row": error.line,
        "column": error.column,
        "cell": error.cell,
    }


def dumps(document: object) -> str:
    """Deterministic JSON, always valid UTF-8: a string holding an undecodable byte (a surrogate
    escape, from a file name in a message) is written with that byte as printable `\\xNN` text."""
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(_printable_strings(document), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return text


def _printable_strings(value: object) -> object:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {_printable_strings(k): _printable_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable_strings(v) for v in value]
    return value


def render_json(report: RunReport, *, root: Path) -> str:
    diagnostics = report.diagnostics
    errors = report.all_errors
    return dumps(
        {
            "schema": SCHEMA,
            "version": offlint.__version__,
            "diagnostics": [diagnostic_object(d, root) for d in diagnostics],
            "errors": [error_object(e, root) for e in errors],
            "summary": {
                "diagnostics": len(diagnostics),
                "fixable": sum(1 for d in diagnostics if d.fixable),
                "errors": len(errors),
                "files": len(report.files),
            },
        }
    )
