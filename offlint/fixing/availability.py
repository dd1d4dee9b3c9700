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

from offlint.analysis.build import build_model
from offlint.analysis.engine import FileSettings
from offlint.analysis.model import ModelOptions, ModuleModel
from offlint.diagnostics import Diagnostic, Fix, TextEdit
from offlint.fixing.apply import FIXERS, MAX_ROUNDS, Fixer, FixSettings, keep_lone_cr
from offlint.fixing.edits import StatementPlan


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


# past this many changed lines the O(N·D) diff gives way to difflib (a plan edits a few statements)
MYERS_MAX_D = 4000
# up to this many changed lines the whole-file Myers diff is exact and cheap; past it, anchored
EXACT_MAX_D = 200


def changed_blocks(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """(a_start, a_end, b_start, b_end) of every block where `b` differs from `a`.

    Myers' O(N·D) diff (a shortest edit) when at most EXACT_MAX_D lines change. Past that, lines
    that occur once in each and in the same order anchor the diff (patience diff), and Myers runs
    between anchors. Myers alone is O(N·D) on the whole file, and D grows with the
    number of fixed methods: quadratic in a class of thousands of them. difflib's SequenceMatcher
    (autojunk off) is quadratic in repeated lines: a 10 000-line table of equal rows in a fixable
    file made `check` spend 9 of its 11 s there."""
    exact = _myers(a, b, EXACT_MAX_D)
    if exact is not None:
        return exact
    blocks: list[tuple[int, int, int, int]] = []
    x = y = 0
    for ax, by in [*_anchors(a, b), (len(a), len(b))]:
        gap_a, gap_b = a[x:ax], b[y:by]
        gap = _myers(gap_a, gap_b, MYERS_MAX_D)
        if gap is None:
            matcher = difflib.SequenceMatcher(None, gap_a, gap_b, autojunk=False)
            gap = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
        for i1, i2, j1, j2 in gap:
            block = (x + i1, x + i2, y + j1, y + j2)
            if blocks and blocks[-1][1] == block[0] and blocks[-1][3] == block[2]:
                first = blocks.pop()
                block = (first[0], block[1], first[2], block[3])
            blocks.append(block)
        x, y = ax + 1, by + 1
    return blocks


def _anchors(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """(i, j) pairs of lines unique in `a` and in `b`, equal, in increasing order of both: the
    longest such chain (patience sorting)."""
    count_a: dict[str, int] = {}
    for line in a:
        count_a[line] = count_a.get(line, 0) + 1
    count_b: dict[str, int] = {}
    where_b: dict[str, int] = {}
    for j, line in enumerate(b):
        count_b[line] = count_b.get(line, 0) + 1
        where_b[line] = j
    pairs = [(i, where_b[line]) for i, line in enumerate(a) if count_a[line] == 1 and count_b.get(line) == 1]
    # longest increasing subsequence of the j's (pairs are in increasing i)
    tails: list[int] = []  # index into pairs of the smallest tail of each chain length
    previous: list[int] = [-1] * len(pairs)
    for index, (_, j) in enumerate(pairs):
        position = _bisect_tails(pairs, tails, j)
        if position > 0:
            previous[index] = tails[position - 1]
        if position == len(tails):
            tails.append(index)
        else:
            tails[position] = index
    chain: list[tuple[int, int]] = []
    at = tails[-1] if tails else -1
    while at >= 0:
        chain.append(pairs[at])
        at = previous[at]
    return chain[::-1]


def _bisect_tails(pairs: list[tuple[int, int]], tails: list[int], j: int) -> int:
    low, high = 0, len(tails)
    while low < high:
        middle = (low + high) // 2
        if pairs[tails[middle]][1] < j:
            low = middle + 1
        else:
            high = middle
    return low


def _myers(a: list[str], b: list[str], max_d: int) -> list[tuple[int, int, int, int]] | None:
    """Myers' O(N·D) diff of `a` and `b`; None when more than `max_d` lines change."""
    n, m = len(a), len(b)
    frontier: dict[int, int] = {1: 0}
    trace: list[dict[int, int]] = []
    for d in range(min(n + m, max_d) + 1):
        trace.append(dict(frontier))
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and frontier[k - 1] < frontier[k + 1]):
                x = frontier[k + 1]
            else:
                x = frontier[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            frontier[k] = x
            if x >= n and y >= m:
                return _blocks(_backtrack(trace, n, m), n, m)
    return None


def _backtrack(trace: list[dict[int, int]], n: int, m: int) -> list[tuple[int, int]]:
    """The (x, y) points where each run of equal lines starts, last first."""
    x, y = n, m
    snakes: list[tuple[int, int]] = []
    for d in range(len(trace) - 1, -1, -1):
        frontier = trace[d]
        k = x - y
        if d == 0:
            snakes.append((0, 0))
            break
        prev_k = k + 1 if k == -d or (k != d and frontier[k - 1] < frontier[k + 1]) else k - 1
        prev_x = frontier[prev_k]
        prev_y = prev_x - prev_k
        mid_x, mid_y = (prev_x, prev_y + 1) if prev_k == k + 1 else (prev_x + 1, prev_y)
        snakes.append((mid_x, mid_y))
        x, y = prev_x, prev_y
    return snakes


def _blocks(snakes: list[tuple[int, int]], n: int, m: int) -> list[tuple[int, int, int, int]]:
    """Changed blocks from the path's points: between points, one insertion or deletion each;
    runs of single steps merge into one block."""
    points = list(reversed(snakes))
    blocks: list[tuple[int, int, int, int]] = []
    # walk the path: from each point the run of equal lines, then one step to the next point
    for (x, y), nxt in zip(points, [*points[1:], None], strict=False):
        if nxt is None:
            break
        nx, ny = nxt
        # the step into `nxt` is a deletion (x advances) or an insertion (y advances); equal
        # lines lie between (x, y) and the step's start
        step_from = (nx - 1, ny) if nx - x > ny - y else (nx, ny - 1)
        i, j = step_from
        if blocks and blocks[-1][1] == i and blocks[-1][3] == j:
            first = blocks.pop()
            blocks.append((first[0], nx, first[2], ny))
        else:
            blocks.append((i, nx, j, ny))
    return blocks


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
