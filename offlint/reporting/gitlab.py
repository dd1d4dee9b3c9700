"""`--output-format gitlab`: a GitLab Code Quality report (a JSON array), which a merge request
shows inline when a job stores it as `artifacts: reports: codequality:`.

    [{"description": "OFL101: `.cpu()` copies ...", "check_name": "OFL101",
      "fingerprint": "<32 hex>", "severity": "critical",
      "location": {"path": "pkg/offload.py", "lines": {"begin": 12, "end": 12}}}]

`path` is relative to the repository root (git's top level, else the project root), as GitLab
matches it against the repository's files. `fingerprint` is the SARIF view's (rule, path, source
line, occurrence: no line number), so a finding moved by an edit elsewhere stays the same issue.
Severity follows the confidence: high `critical`, medium `major`, low `minor`. A file that could
not be checked is an issue too (`check_name` `offlint/<error kind>`, severity `blocker`): a CI
run that skipped a file says so. In a notebook, lines are the cell's and the description names
the cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import sha256
from pathlib import Path
from typing import Any

from offlint.diagnostics import Confidence, RunReport
from offlint.reporting._sources import SourceCache, path_from, repository_root
from offlint.reporting.json_format import dumps
from offlint.reporting.sarif import fingerprints

SEVERITY = {Confidence.HIGH: "critical", Confidence.MEDIUM: "major", Confidence.LOW: "minor"}


def render_gitlab(
    report: RunReport, *, root: Path, project_root: Path | None = None, sources: Mapping[str, str] | None = None
) -> str:
    base = repository_root(root.resolve(), project_root)
    diagnostics = report.diagnostics
    issues: list[dict[str, Any]] = []
    prints = fingerprints(diagnostics, root, SourceCache(root, sources))
    for diagnostic, fingerprint in zip(diagnostics, prints, strict=True):
        cell = "" if diagnostic.cell is None else f" (cell {diagnostic.cell})"
        where = diagnostic.location
        issues.append(
            {
                "description": f"{diagnostic.code}: {diagnostic.message}{cell}",
                "check_name": diagnostic.code,
                "fingerprint": fingerprint,
                "severity": SEVERITY[diagnostic.confidence],
                "location": {
                    "path": path_from(diagnostic.path, root, base),
                    "lines": {"begin": where.line, "end": where.end_line},
                },
            }
        )
    for error in report.all_errors:
        path = path_from(error.path, root, base)
        key = "\0".join(("error", error.kind.value, path, error.message))
        issues.append(
            {
                "description": f"offlint could not check this file: {error.kind.value}: {error.message}",
                "check_name": f"offlint/{error.kind.value}",
                "fingerprint": sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32],
                "severity": "blocker",
                "location": {"path": path, "lines": {"begin": error.line or 1}},
            }
        )
    return dumps(issues)
