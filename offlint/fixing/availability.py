"""Which diagnostics `offlint fix` removes, so `check` marks only those fixable ([*]).

A rule having a fixer is not enough: the offloader rewrite applies only to the prefetch/wait
shape it recognises, the pin-memory fix only where the allocation is in view. The fixers' planning
step runs on the model `check` already built (no second parse); a diagnostic is fixable when a
fixer plans an edit for its rule in this file.
"""

from __future__ import annotations

import dataclasses

from offlint.analysis.engine import FileSettings
from offlint.analysis.model import ModuleModel
from offlint.diagnostics import Diagnostic, FixSafety


def fixers_may_plan(model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> bool:
    """On a skeleton model (`analysis/skeleton.py`): False when no fixer plans an edit for these
    diagnostics, so no libcst parse is needed to confirm one. A fixer that gets as far as writing
    code fails on a skeleton (it cannot be printed): that, or any plan, means "parse and see"."""
    from offlint.fixing.apply import FIXERS, FixSettings

    wanted = frozenset(d.code for d in diagnostics if d.fixable)
    fix_settings = FixSettings(select=wanted, capture_reachable=settings.capture_reachable)
    for fixer in FIXERS:
        if not fixer.selected(wanted):
            continue
        try:
            plan, _ = fixer.plan(model, fix_settings)
        except Exception:
            return True
        if plan:
            return True
    return False


def without_fixes(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [d if not d.fixable else dataclasses.replace(d, fix_safety=FixSafety.NONE) for d in diagnostics]


def confirm_fix_availability(
    model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]
) -> list[Diagnostic]:
    from offlint.fixing.apply import FIXERS, FixSettings

    wanted = frozenset(d.code for d in diagnostics if d.fixable)
    fix_settings = FixSettings(select=wanted, capture_reachable=settings.capture_reachable)
    planned: set[str] = set()
    for fixer in FIXERS:
        if not fixer.selected(wanted):
            continue
        try:
            plan, _ = fixer.plan(model, fix_settings)
        except Exception:  # a fixer that cannot plan offers no fix; `fix` reports the failure
            continue
        if plan:
            planned.update(rule for record in plan.records for rule in record.rules)
    return [
        d if not d.fixable or d.code in planned else dataclasses.replace(d, fix_safety=FixSafety.NONE)
        for d in diagnostics
    ]
