"""The fix each diagnostic carries, so `check` marks fixable ([*]) exactly what `fix` changes.

A rule having a fixer is not enough: the offloader rewrite applies only to the prefetch/wait
shape it recognises, the pin-memory fix only where the allocation is in view. A diagnostic
carries a fix when a fixer plans one for its rule in this file; the fix's edits are what that
plan changes in the text `check` read. Planning needs a lossless tree: `check` first runs the
fixers on its skeleton model, where "nothing to plan" settles it without a libcst parse, and
parses with libcst only when a fixer may plan something.

`FIX_AVAILABILITY` is the analysis engine's `FixConfirmer`; the pipeline hands it in.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

import libcst as cst

from offlint.analysis.engine import FileSettings
from offlint.analysis.model import ModuleModel
from offlint.diagnostics import Diagnostic, Fix, TextEdit
from offlint.fixing.apply import FIXERS, Fixer, FixSettings
from offlint.fixing.edits import StatementPlan


def _plans(
    model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]
) -> Iterator[tuple[Fixer, StatementPlan | Exception]]:
    """What each fixer selected by the fixable diagnostics plans on `model` (or why it could not)."""
    wanted = frozenset(d.code for d in diagnostics if d.fixable)
    fix_settings = FixSettings(
        select=wanted,
        capture_reachable=settings.capture_reachable,
        min_confidence=settings.min_confidence,
        compile_safe=settings.compile_safe,
        seeds=settings.seeds,
        segmented_capture=settings.segmented_capture,
    )
    for fixer in FIXERS:
        if not fixer.selected(wanted):
            continue
        try:
            yield fixer, fixer.plan(model, fix_settings)[0]
        except Exception as exc:
            yield fixer, exc


def text_edits(module: cst.Module, before: list[str], plan: StatementPlan) -> tuple[TextEdit, ...]:
    """The plan's changes to `module` (whose text is the lines `before`), as whole-line
    replacements (the plan edits whole statements; everything between them is kept byte for byte)."""
    after = plan.apply(module).code.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return tuple(
        TextEdit(first + 1, 1, last + 1, 1, "".join(after[start:end]))
        for tag, first, last, start, end in matcher.get_opcodes()
        if tag != "equal"
    )


class FixAvailability:
    """The fixers' answer to "what does `fix` change for this diagnostic?"
    (analysis.engine.FixConfirmer)."""

    def may_plan(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> bool:
        """On a skeleton model (`analysis/skeleton.py`): False when no fixer plans an edit for these
        diagnostics, so no libcst parse is needed to confirm one. A fixer that gets as far as
        writing code fails on a skeleton (it cannot be printed): that, or any plan, means "parse
        and see"."""
        return any(isinstance(plan, Exception) or plan for _, plan in _plans(model, settings, diagnostics))

    def confirm(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        """Each diagnostic with the fix planned for its rule (the first fixer's, in FIXERS order,
        as `fix` applies them), or no fix at all."""
        planned: dict[str, tuple[Fixer, tuple[TextEdit, ...]]] = {}
        before: list[str] | None = None  # the module's lines, rendered once for every fixer
        for fixer, plan in _plans(model, settings, diagnostics):
            # a fixer that cannot plan offers no fix; `fix` reports the failure
            if isinstance(plan, Exception) or not plan:
                continue
            rules = {rule for record in plan.records for rule in record.rules} - planned.keys()
            if not rules:
                continue
            try:
                if before is None:
                    before = model.module.code.splitlines(keepends=True)
                edits = text_edits(model.module, before, plan)
            except Exception:  # `fix` drops such a plan (and says why); so does `check`
                continue
            if edits:
                planned.update((rule, (fixer, edits)) for rule in rules)
        out = []
        for d in diagnostics:
            if d.code not in planned or not d.fixable:
                out.append(d.without_fix())
                continue
            fixer, edits = planned[d.code]  # safety: the rule's, stated once in its rules/ file
            out.append(d.with_fix(Fix(d.fix_title or fixer.name, d.fix_safety, edits)))
        return out


FIX_AVAILABILITY = FixAvailability()
