"""The human summary the CLI writes to stderr (never stdout, which holds only the report)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from offlint.diagnostics import Diagnostic, FixSafety, RunReport
from offlint.reporting._sources import display_path

# the commands that apply the fixes `check` offers: the safe ones, and the unsafe ones too (an
# unsafe fix changes behaviour on purpose; `offlint fix --apply` applies both as well)
FIX_COMMAND = "offlint check --fix"
UNSAFE_FIX_COMMAND = "offlint check --fix --unsafe-fixes"


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
    """`Found 3 errors (1 fixable with `offlint check --fix`, 1 more with unsafe fixes: `offlint
    check --fix --unsafe-fixes`).` or `All checks passed!`."""
    diagnostics = report.diagnostics
    unchecked = len({error.path for error in report.all_errors})
    lines = []
    if diagnostics:
        hint = f" ({_fix_hint(diagnostics)})" if show_fixes and any(d.fixable for d in diagnostics) else ""
        lines.append(f"Found {_plural(len(diagnostics), 'error')}{hint}.")
    elif not report.files and not unchecked:
        # never "All checks passed!" for a run that checked nothing (the CLI says why)
        lines.append("No files were checked.")
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


def _fix_hint(diagnostics: list[Diagnostic]) -> str:
    """How many findings have a safe fix and how many an unsafe one, and the command for each."""
    safe = sum(1 for d in diagnostics if d.fixable and d.fix_safety is FixSafety.SAFE)
    unsafe = sum(1 for d in diagnostics if d.fixable and d.fix_safety is not FixSafety.SAFE)
    parts = []
    if safe:
        parts.append(f"{safe} fixable with `{FIX_COMMAND}`")
    if unsafe:
        more = " more" if safe else ""
        parts.append(f"{unsafe}{more} with {'an unsafe fix' if unsafe == 1 else 'unsafe fixes'}: `{UNSAFE_FIX_COMMAND}`")
    return ", ".join(parts)


def render_summary(report: RunReport, *, root: Path | None = None, show_fixes: bool = True) -> str:
    """Run errors first, then the counts: everything a human reads on stderr after a check."""
    return render_run_errors(report, root=root) + render_counts(report, show_fixes=show_fixes)
