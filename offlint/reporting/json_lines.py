"""`--output-format json-lines`: one JSON object per line (ruff's `json-lines`), for tools that
stream. Each diagnostic is the object `--output-format json` lists under `diagnostics` (same
fields, same order), then each file that could not be checked is the object `json` lists under
`errors` (it has `kind`, a diagnostic has `code`). No summary line: count the lines."""

from __future__ import annotations

import json
from pathlib import Path

from offlint.diagnostics import RunReport
from offlint.reporting.json_format import _printable_strings, diagnostic_object, error_object


def _line(document: object) -> str:
    text = json.dumps(document, sort_keys=True, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # an undecodable byte of a file name: as `\xNN` text
        text = json.dumps(_printable_strings(document), sort_keys=True, ensure_ascii=False)
    return text + "\n"


def render_json_lines(report: RunReport, *, root: Path) -> str:
    objects = [diagnostic_object(d, root) for d in report.diagnostics]
    objects += [error_object(e, root) for e in report.all_errors]
    return "".join(_line(document) for document in objects)
