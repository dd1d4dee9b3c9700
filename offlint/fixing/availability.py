"""Which diagnostics `offlint fix` removes, so `check` marks only those fixable ([*]).

A rule having a fixer is not enough: the offloader rewrite applies only to the prefetch/wait
shape it recognises, the pin-memory fix only where the allocation is in view. A diagnostic is
fixable when a fixer plans an edit for its rule in this file. Planning needs a lossless tree:
`check` first runs the fixers on its skeleton model, where "nothing to plan" settles it without
a libcst parse, and parses with libcst only when a fixer may plan something.

`FIX_AVAILABILITY` is the analysis engine's `FixConfirmer`; the pipeline hands it in.
"""

from __future__ import annotations

from collections.abc import Iterator

from offlint.analysis.engine import FileSettings
from offlint.analysis.model import ModuleModel
from offlint.diagnostics import Diagnostic
from offlint.fixing.apply import FIXERS, FixSettings
from offlint.fixing.edits import StatementPlan


def _plans(
    model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]
) -> Iterator[StatementPlan | Exception]:
    """What each fixer selected by the fixable diagnostics plans on `model` (or why it could not)."""
    wanted = frozenset(d.code for d in diagnostics if d.fixable)
    fix_settings = FixSettings(
        select=wanted, capture_reachable=settings.capture_reachable, min_confidence=settings.min_confidence
    )
    for fixer in FIXERS:
        if not fixer.selected(wanted):
            continue
        try:
            yield fixer.plan(model, fix_settings)[0]
        except Exception as exc:
            yield exc


class FixAvailability:
    """The fixers' answer to "does `fix` remove this diagnostic?" (analysis.engine.FixConfirmer)."""

    def may_plan(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> bool:
        """On a skeleton model (`analysis/skeleton.py`): False when no fixer plans an edit for these
        diagnostics, so no libcst parse is needed to confirm one. A fixer that gets as far as
        writing code fails on a skeleton (it cannot be printed): that, or any plan, means "parse
        and see"."""
        return any(isinstance(plan, Exception) or plan for plan in _plans(model, settings, diagnostics))

    def confirm(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        planned: set[str] = set()
        for plan in _plans(model, settings, diagnostics):
            # a fixer that cannot plan offers no fix; `fix` reports the failure
            if not isinstance(plan, Exception):
                planned.update(rule for record in plan.records for rule in record.rules)
        return [d if d.code in planned else d.without_fix() for d in diagnostics]


FIX_AVAILABILITY = FixAvailability()
