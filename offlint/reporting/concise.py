"""`--output-format concise`: one `path:line:col: CODE [*] message` line per diagnostic (ruff's);
`path:cell N:line:col: ...` in a notebook."""

from __future__ import annotations

from pathlib import Path

from offlint.diagnostics import Confidence, Diagnostic, RunReport
from offlint.reporting._sources import display_path

FIXABLE_MARKER = "[*]"


def headline(diagnostic: Diagnostic, root: Path, *, show_fixes: bool) -> str:
    """`path:line:col: CODE message`, with `[*]` before the message when a fix exists and the
    confidence after it when it is below high (`[medium]`, `[low]`)."""
    marker = f"{FIXABLE_MARKER} " if show_fixes and diagnostic.fixable else ""
    tier = "" if diagnostic.confidence is Confidence.HIGH else f" [{diagnostic.confidence.value}]"
    return (
        f"{display_path(diagnostic.path, root)}:{diagnostic.position}: "
        f"{diagnostic.code} {marker}{diagnostic.message}{tier}"
    )


def render_concise(report: RunReport, *, root: Path, show_fixes: bool = True) -> str:
    return "".join(
        headline(diagnostic, root, show_fixes=show_fixes) + "\n"
        for diagnostic in report.diagnostics
    )
