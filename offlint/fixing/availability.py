"""Which diagnostics `offlint fix` really removes, so `check` marks only those fixable ([*]).

A rule having a fixer is not enough: the offloader rewrite applies only to the prefetch/wait
shape it recognises. The fixers run in memory on the file (only files with a fixable-rule
finding pay for it); a diagnostic counts as fixable when the fixed text no longer has it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from offlint.analysis.engine import FileSettings
from offlint.diagnostics import Diagnostic, FixSafety


def confirm_fix_availability(
    data: bytes, path: str, settings: FileSettings, diagnostics: list[Diagnostic]
) -> list[Diagnostic]:
    from offlint.fixing.apply import FixSettings, fix_source

    fixable_codes = frozenset(d.code for d in diagnostics if d.fixable)
    result = fix_source(
        data,
        path,
        FixSettings(select=fixable_codes, capture_reachable=settings.capture_reachable),
    )
    if result.errors or not result.changed:
        left = Counter((d.code, d.message) for d in diagnostics)
    else:
        left = Counter((d.code, d.message) for d in result.remaining)
    confirmed: list[Diagnostic] = []
    for diagnostic in diagnostics:
        key = (diagnostic.code, diagnostic.message)
        if diagnostic.fixable and left[key] > 0:
            left[key] -= 1  # still there after fixing: no fix for this one
            diagnostic = dataclasses.replace(diagnostic, fix_safety=FixSafety.NONE)
        confirmed.append(diagnostic)
    return confirmed
