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

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.build import build_model
from offlint.analysis.engine import FileSettings
from offlint.analysis.model import ModelOptions, ModuleModel
from offlint.diagnostics import Diagnostic, Fix, TextEdit
from offlint.fixing.apply import FIXERS, MAX_ROUNDS, Fixer, FixSettings, keep_lone_cr
from offlint.fixing.edits import StatementPlan
from offlint.fixing.line_diff import changed_blocks


def _plans(
    model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]
) -> Iterator[tuple[Fixer, StatementPlan | Exception]]:
    """What each fixer selected by the fixable diagnostics plans on `model` (or why it could not)."""
    wanted = frozenset(d.code for d in diagnostics if d.fixable)
    fix_settings = _fix_settings(settings, diagnostics)
    for fixer in FIXERS:
        if not fixer.selected(wanted):
            continue
        try:
            yield fixer, fixer.plan(model, fix_settings)[0]
        except Exception as exc:
            yield fixer, exc


def _fix_settings(settings: FileSettings, diagnostics: list[Diagnostic]) -> FixSettings:
    return FixSettings(
        select=frozenset(d.code for d in diagnostics if d.fixable),
        capture_reachable=settings.capture_reachable,
        min_confidence=settings.min_confidence,
        compile_safe=settings.compile_safe,
        seeds=settings.seeds,  # what check knew across modules: fix plans with the same facts
        segmented_capture=settings.segmented_capture,
    )


def _converges(model: ModuleModel, fixers: list[Fixer], settings: FixSettings) -> bool:
    """Whether `fix`'s rounds reach a fixed point within MAX_ROUNDS on this module: the fixers
    applied in turn, each on the text the previous one left (as `fix_source` does), until a round
    changes nothing. A fix that keeps adding code is not written by `fix`, so `check` must not
    offer it."""
    order = [fixer for fixer in FIXERS if fixer in fixers]
    module = model.module
    current: ModuleModel | None = model
    for _ in range(MAX_ROUNDS):
        progressed = False
        for fixer in order:
            try:
                if current is None:
                    current = build_model(module, ModelOptions(capture_reachable=settings.capture_reachable))
                plan = fixer.plan(current, settings)[0]
                if not plan:
                    continue
                fixed = plan.apply(module).code
                if fixed == module.code:
                    continue
                module = cst.parse_module(fixed)
            except Exception:  # `fix` drops a fixer that fails; the others go on
                continue
            if current is not model:
                current.dispose()
            current = None
            progressed = True
        if not progressed:
            return True
    return False


def text_edits(module: cst.Module, before: list[str], plan: StatementPlan) -> tuple[TextEdit, ...]:
    """The plan's changes to `module` (whose text is the lines `before`), as whole-line
    replacements (the plan edits whole statements; everything between them is kept byte for byte)."""
    after = keep_lone_cr(plan.apply(module).code, module.code).splitlines(keepends=True)
    return tuple(
        TextEdit(first + 1, 1, last + 1, 1, "".join(after[start:end]))
        for first, last, start, end in changed_blocks(before, after)
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
        if planned and not _converges(model, [fixer for fixer, _ in planned.values()], _fix_settings(settings, diagnostics)):
            planned.clear()  # `fix` writes nothing for a file whose fixes keep changing it
        out = []
        for d in diagnostics:
            if d.code not in planned or not d.fixable:
                out.append(d.without_fix())
                continue
            fixer, edits = planned[d.code]  # safety: the rule's, stated once in its rules/ file
            out.append(d.with_fix(Fix(d.fix_title or fixer.name, d.fix_safety, edits)))
        return out


FIX_AVAILABILITY = FixAvailability()
