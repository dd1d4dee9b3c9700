"""The human summary the CLI writes to stderr (never stdout, which holds only the report)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from offlint.diagnostics import RunReport
from offlint.reporting._sources import display_path

FIX_COMMAND = "offlint fix --apply"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def render_run_errors(report: RunReport, *, root: Path | None = None) -> str:
    """One `path[:line]: kind: message` line per file that could not be checked."""
    lines = []
    for error in report.all_errors:
        if root is not None:
            error = dataclasses.replace(error, path=display_path(error.path, root))
        lines.append(error.one_line() + "\n")
    return "".join(lines)


def render_counts(report: RunReport, *, show_fixes: bool = True) -> str:
    """`Found 3 errors (2 fixable with `offlint fix --apply`).` or `All checks passed!`."""
    diagnostics = report.diagnostics
    unchecked = len({error.path for error in report.all_errors})
    lines = []
    if diagnostics:
        fixable = sum(1 for d in diagnostics if d.fixable)
        hint = f" ({fixable} fixable with `{FIX_COMMAND}`)" if show_fixes and fixable else ""
        lines.append(f"Found {_plural(len(diagnostics), 'error')}{hint}.")
    elif not unchecked:
        lines.append("All checks passed!")
    else:
        # never "All checks passed!" when some files were not checked at all
        lines.append("No errors found in the files that could be checked.")
    if unchecked:
        lines.append(f"{_plural(unchecked, 'file')} could not be checked.")
    if report.hidden:
        lines.append(
            f"{_plural(report.hidden, 'finding')} below the confidence floor not shown (`--min-confidence low` shows them)."
        )
    return "".join(line + "\n" for line in lines)


def render_summary(report: RunReport, *, root: Path | None = None, show_fixes: bool = True) -> str:
    """Run errors first, then the counts: everything a human reads on stderr after a check."""
    return render_run_errors(report, root=root) + render_counts(report, show_fixes=show_fixes)
