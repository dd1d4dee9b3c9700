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
from offlint.diagnostics import Diagnostic, Fix, FixSafety, TextEdit
from offlint.fixing import apply as apply_module
from offlint.fixing.apply import MAX_ROUNDS, Fixer, FixSettings, compiles, keep_lone_cr
from offlint.fixing.capture_modes import not_sound_reason
from offlint.fixing.edits import FixUnit, Owner, StatementPlan
from offlint.fixing.line_diff import changed_blocks


def _plans(
    model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]
) -> Iterator[tuple[Fixer, StatementPlan | Exception]]:
    """What each fixer selected by the fixable diagnostics plans on `model` (or why it could not)."""
    wanted = frozenset(d.code for d in diagnostics if d.fixable)
    fix_settings = _fix_settings(settings, diagnostics)
    for fixer in apply_module.FIXERS:
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
        strategy=settings.fix_strategy,
        capture_modes=settings.capture_modes,
        seeds=settings.seeds,  # what check knew across modules: fix plans with the same facts
        segmented_capture=settings.segmented_capture,
    )


def _converges(model: ModuleModel, fixers: list[Fixer], settings: FixSettings) -> bool:
    """Whether `fix`'s rounds reach a fixed point within MAX_ROUNDS on this module: the fixers
    applied in turn, each on the text the previous one left (as `fix_source` does), until a round
    changes nothing. A fix that keeps adding code is not written by `fix`, so `check` must not
    offer it."""
    order = [fixer for fixer in apply_module.FIXERS if fixer in fixers]
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
    (analysis.engine.FixConfirmer).

    `converge`: offer fixes only where `fix`'s rounds reach a fixed point (`check`'s [*]). The
    fix loop itself re-checks and stops at its bound, so it asks without (one parse and one
    planning round less per check). `reasons`: also confirm (parse with libcst) where a fixer
    only says why it leaves a finding, so that `fix` can print it; `check` does not pay that."""

    def __init__(self, *, converge: bool = True, reasons: bool = False) -> None:
        self.converge = converge
        self.reasons = reasons

    def may_plan(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> bool:
        """On a skeleton model (`analysis/skeleton.py`): False when no fixer plans an edit for these
        diagnostics, so no libcst parse is needed to confirm one. A fixer that gets as far as
        writing code fails on a skeleton (it cannot be printed): that, or any plan, means "parse
        and see"."""
        if self.reasons and any(d.fixable and d.confidence.at_least(settings.min_confidence) for d in diagnostics):
            return True  # each finding left gets its reason, which the lossless tree settles
        return any(isinstance(plan, Exception) or plan for _, plan in _plans(model, settings, diagnostics))

    def confirm(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        """Each diagnostic with its own fix, or none (and, where a fixer looked, why not).

        Every fixer plans on this model; each plan splits into units, the changes that fix the
        same findings together (`StatementPlan.units`). A finding's fix is the unit that owns it,
        from the first fixer (in FIXERS order) that owns it; a unit owning a finding an earlier
        fixer already owns is not offered (`fix` re-checks after applying and plans again).
        Findings declared a pair (a fork and the wait on its event) share one fix, the union of
        their units, or have none."""
        return attach_fixes(model, settings, diagnostics, converge=self.converge)


def _key(code: str, line: int, column: int) -> tuple[str, int, int]:
    return (code, line, column)


def attach_fixes(
    model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic], *, converge: bool = True
) -> list[Diagnostic]:
    from offlint.analysis.positions import libcst_locator

    by_key = {_key(d.code, d.location.line, d.location.column): d for d in diagnostics}
    plans = [(fixer, plan) for fixer, plan in _plans(model, settings, diagnostics) if not isinstance(plan, Exception)]
    owners = [o for _, plan in plans for unit in plan.units() for o in unit.owners]
    owners += [o for _, plan in plans for pair in plan.pairs for o in pair]
    nodes = list({id(o.node): o.node for o in owners}.values())
    nodes += [node for _, plan in plans for _, node, _ in plan.not_fixed if id(node) not in {id(n) for n in nodes}]
    try:
        where = libcst_locator(model.module, model.module.code)(nodes) if nodes else {}
    except Exception:  # no positions, no fixes: `fix` reports what it cannot do
        return [d.without_fix() for d in diagnostics]

    def key(owner: Owner) -> tuple[str, int, int] | None:
        span = where.get(owner.node)
        return None if span is None else _key(owner.code, span[0], span[1] + 1)

    before = model.module.code.splitlines(keepends=True)
    original_compiles = compiles("".join(before).encode("utf-8"), "<fix>")
    reasons: dict[tuple[str, int, int], list[str]] = {}

    def say(keys: set[tuple[str, int, int]], reason: str) -> None:
        for k in keys:
            if reason not in reasons.setdefault(k, []):
                reasons[k].append(reason)

    def checked_edits(plan: StatementPlan, name: str, keys: set[tuple[str, int, int]]) -> tuple[TextEdit, ...] | None:
        """The plan's edits, when its result compiles and it edits only its own statements."""
        try:
            edits = text_edits(model.module, before, plan)
        except Exception:  # `fix` would drop such a plan; so does `check`
            say(keys, f"the {name} fix could not be written")
            return None
        if not edits:
            return None
        if _breaks_compilation(before, edits, original_compiles):
            say(keys, f"the {name} fix would not compile")
            return None
        outside = _outside_own_statements(model, before, plan, edits)
        if outside is not None:
            say(keys, f"the {name} fix would change line {outside}, outside the statements of the findings it fixes")
            return None
        return edits

    # claim: each finding's first valid unit (FIXERS order); groups merge the units of a pair
    units: list[tuple[Fixer, FixUnit, tuple[TextEdit, ...]]] = []
    claimed: dict[tuple[str, int, int], int] = {}
    for fixer, plan in plans:
        for code, node, reason in plan.not_fixed:
            found = key(Owner(code, node))
            if found is not None:
                say({found}, reason)
        for unit in plan.units():
            keys = {k for k in (key(o) for o in unit.owners) if k is not None}
            if not keys & by_key.keys() or keys & claimed.keys():
                continue
            unsound = not_sound_reason(unit.label or fixer.name, settings.capture_modes)
            if unsound is not None:  # a fix must hold under every capture mode the engine may use
                say(keys & by_key.keys(), unsound)
                continue
            edits = checked_edits(unit.plan, unit.label or fixer.name, keys & by_key.keys())
            if edits is None:
                continue
            units.append((fixer, unit, edits))
            for k in keys:
                claimed[k] = len(units) - 1
    parent = list(range(len(units)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    dropped: set[int] = set()
    for _, plan in plans:
        for first, second in plan.pairs:
            a, b = key(first), key(second)
            if a is None or b is None or a not in by_key or b not in by_key:
                continue
            if a in claimed and b in claimed:
                parent[find(claimed[a])] = find(claimed[b])
            elif a in claimed or b in claimed:
                fixed, left = (a, b) if a in claimed else (b, a)
                dropped.add(claimed[fixed])
                shown = by_key[left].source_line.strip() or left[0]
                why = "; ".join(reasons.get(left, [])) or "no fix was planned for it"
                say(
                    {fixed},
                    f"its pair `{shown}` ({left[0]}, line {left[1]}) could not be fixed ({why}): a pair is "
                    "fixed together or not at all",
                )
    groups: dict[int, list[int]] = {}
    for index in range(len(units)):
        groups.setdefault(find(index), []).append(index)
    fixes: dict[tuple[str, int, int], Fix] = {}
    planned_fixers: list[Fixer] = []
    gone = {find(d) for d in dropped}
    for root, members in groups.items():
        keys = {k for m in members for k in (key(o) for o in units[m][1].owners) if k is not None} & by_key.keys()
        if root in gone:
            continue
        first_fixer, _, edits = units[members[0]]
        label = "+".join(dict.fromkeys(units[m][1].label or units[m][0].name for m in members))
        if len(members) > 1:
            unsound = not_sound_reason(label, settings.capture_modes)
            if unsound is not None:
                say(keys, unsound)
                continue
            merged = merge_plans([units[m][1].plan for m in members])
            if merged is None:
                say(keys, "the fixes of this hazard pair change the same statement")
                continue
            joint = checked_edits(merged, label, keys)
            if joint is None:
                continue
            edits = joint
        unsafe = any(by_key[k].fix_safety is not FixSafety.SAFE for k in keys)
        title = by_key[min(keys)].fix_title or first_fixer.name
        notes = tuple(dict.fromkeys(n for m in members for n in units[m][1].notes))
        fix = Fix(title, FixSafety.UNSAFE if unsafe else FixSafety.SAFE, edits, label, notes)
        for k in keys:
            fixes[k] = fix
        planned_fixers += [units[m][0] for m in members if units[m][0] not in planned_fixers]
    if converge and fixes and not _converges(model, planned_fixers, _fix_settings(settings, diagnostics)):
        fixes.clear()  # `fix` writes nothing for a file whose fixes keep changing it
        for d in diagnostics:
            reasons.setdefault(_key(d.code, d.location.line, d.location.column), []).append(
                "the fixes of this file do not reach a fixed point"
            )
    out = []
    for d in diagnostics:
        k = _key(d.code, d.location.line, d.location.column)
        if k in fixes and d.fixable:
            fix = fixes[k]  # safety: the rule's, stated once in its rules/ file
            out.append(d.with_fix(Fix(d.fix_title or fix.title, d.fix_safety, fix.edits, fix.fixer, fix.notes)))
        elif d.fixable and reasons.get(k):
            out.append(d.left_because("; ".join(reasons[k])))
        elif d.fixable and d.confidence.at_least(settings.min_confidence):
            looked = [fixer.name for fixer, _ in plans if d.code in fixer.rules]
            hint = (d.fix_title or "").rstrip(".")
            out.append(
                d.left_because(
                    f"no automatic fix matches this code (looked: {', '.join(looked) or 'none'})"
                    + (f"; by hand: {hint[0].lower()}{hint[1:]}" if hint else "")
                )
            )
        else:
            out.append(d.without_fix())
    return out


def _breaks_compilation(before: list[str], edits: tuple[TextEdit, ...], original_compiles: bool) -> bool:
    """The fixed text does not compile where the original did (a fix is not to blame for code
    CPython refused before it)."""
    return original_compiles and not compiles(_applied(before, edits).encode("utf-8"), "<fix>")


def _applied(before: list[str], edits: tuple[TextEdit, ...]) -> str:
    lines = list(before)
    for edit in sorted(edits, key=lambda e: (e.line, e.end_line), reverse=True):
        lines[edit.line - 1 : edit.end_line - 1] = [edit.content]
    return "".join(lines)


def _outside_own_statements(
    model: ModuleModel, before: list[str], plan: StatementPlan, edits: tuple[TextEdit, ...]
) -> int | None:
    """The first line an edit changes outside the statements the plan's changes are anchored at
    (with the comment and blank lines around them, which an insertion may move), or None."""
    from offlint.analysis.positions import locate

    anchors = [record.anchor for record in plan.records]
    where = locate(model.module, "".join(before), anchors)
    spans = []
    for record in plan.records:
        found = where.get(record.anchor)
        if found is None:
            continue
        first = found.start.line - len(getattr(record.anchor, "leading_lines", ()))
        last = found.end.line
        while last < len(before) and (not before[last].strip() or before[last].lstrip().startswith("#")):
            last += 1
        spans.append((max(1, first), last + 1))  # lines [first, last] and the point after them
    merged: list[list[int]] = []  # statements next to each other are one stretch of lines
    for first, point in sorted(spans):
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], point)
        else:
            merged.append([first, point])
    for edit in edits:
        if not any(first <= edit.line and max(edit.end_line, edit.line) <= point for first, point in merged):
            return edit.line
    return None


def merge_plans(plans: list[StatementPlan]) -> StatementPlan | None:
    """One plan doing what each of `plans` does (units of one fixer or of several, planned on
    the same tree), or None when two of them replace the same statement."""
    if len(plans) == 1:
        return plans[0]
    merged = StatementPlan()
    for plan in plans:
        if not merged.absorb(plan):
            return None
    return merged


FIX_AVAILABILITY = FixAvailability()
FIX_LOOP_AVAILABILITY = FixAvailability(converge=False, reasons=True)
