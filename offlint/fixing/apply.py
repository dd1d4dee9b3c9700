"""Run the fixers on one file's bytes until nothing more applies.

Each fixer plans statement-level changes on a fresh parse of the current text; its result is
kept only if it parses (libcst) and compiles (Python) and every byte outside the statements it
edits is unchanged, otherwise it is dropped and reported and the other fixers still run. Bytes
are parsed as bytes, so encoding, BOM and newlines round-trip; a file libcst does not reproduce
byte for byte (a form feed at a line start, a lone `\r` at the end, a second BOM) is not fixed.
The loop is bounded; a file that still changes after MAX_ROUNDS is reported, not looped on.

The whole of it runs on a deep-stack thread (`deep_stack.py`) inside one error boundary: a
file's failure, whatever the step, is one error on its result and never reaches the run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import CodeRange

from offlint.analysis.callgraph import Seed
from offlint.analysis.engine import (
    DecodeError,
    FileSettings,
    check_source,
    decode_source,
)
from offlint.analysis.guard import compile_quietly
from offlint.analysis.model import ModelOptions, ModuleModel
from offlint.diagnostics import (
    DEFAULT_MIN_CONFIDENCE,
    Confidence,
    Diagnostic,
    FileError,
    FixSafety,
)
from offlint.fixing.capture_modes import CAPTURE_MODES
from offlint.fixing.compile_safe import compile_safe_for
from offlint.fixing.edits import Edit, StatementPlan
from offlint.fixing.event_handoff import RULES as HANDOFF_RULES
from offlint.fixing.event_handoff import plan_event_handoffs
from offlint.fixing.external_event import RULES as EXTERNAL_RULES
from offlint.fixing.external_event import plan_external_events
from offlint.fixing.fork_join import RULES as FORK_JOIN_RULES
from offlint.fixing.fork_join import plan_fork_joins
from offlint.fixing.hook_moves import RULES as HOOK_MOVE_RULES
from offlint.fixing.hook_moves import plan_hook_moves
from offlint.fixing.mechanical import plan_pin_memory_fix, plan_record_stream_fix
from offlint.fixing.offloader_rewrite import AUTO, REWRITE_RULES, plan_offloader_fix

MAX_ROUNDS = 4


@dataclass(frozen=True)
class FixSettings:
    select: frozenset[str]  # rule codes whose fixes may run (and that `check` verifies)
    strategy: str = AUTO
    capture_reachable: tuple[str, ...] = ()
    min_confidence: Confidence = DEFAULT_MIN_CONFIDENCE  # fixes act on what `check` shows
    compile_safe: bool | None = None  # no capture test in the output; None: where torch.compile is used
    # what the whole tree taught `check` about this file (other modules' capture regions reaching
    # its functions, segmented capture): `fix` sees the findings `check` showed, not fewer
    seeds: tuple[Seed, ...] = ()
    segmented_capture: bool = False
    # the semantic core's receiver objects (`FileSettings.hints`)
    hints: tuple[tuple[str, str, str], ...] = ()
    # how the engine may capture (fixing/capture_modes.py): a fix is offered only where it is
    # sound under each; default every mode
    capture_modes: tuple[str, ...] = CAPTURE_MODES

    def model_options(self) -> ModelOptions:
        return ModelOptions(
            capture_reachable=self.capture_reachable,
            seeds=self.seeds,
            segmented_capture=self.segmented_capture,
            hints=self.hints,
        )


@dataclass(frozen=True)
class Fixer:
    name: str
    rules: tuple[str, ...]
    safety: FixSafety
    plan: Callable[[ModuleModel, FixSettings], tuple[StatementPlan, list[str]]]

    def selected(self, select: frozenset[str]) -> bool:
        return any(rule in select for rule in self.rules)


def _offloader(model: ModuleModel, settings: FixSettings) -> tuple[StatementPlan, list[str]]:
    return plan_offloader_fix(
        model,
        settings.strategy,
        compile_safe=_compile_safe(model, settings),
        floor=settings.min_confidence,
        capture_modes=settings.capture_modes,
    )


def _compile_safe(model: ModuleModel, settings: FixSettings) -> bool:
    return compile_safe_for(model, settings.compile_safe)


FIXERS = (
    Fixer("offloader", REWRITE_RULES, FixSafety.UNSAFE, _offloader),
    Fixer(
        "event-handoff",
        HANDOFF_RULES,
        FixSafety.UNSAFE,
        lambda model, settings: (
            plan_event_handoffs(model, settings.min_confidence, compile_safe=_compile_safe(model, settings)),
            [],
        ),
    ),
    Fixer(  # after the hand-off fixer: the waits whose producer it cannot re-issue
        "external-event",
        EXTERNAL_RULES,
        FixSafety.UNSAFE,
        lambda model, settings: (
            plan_external_events(model, settings.min_confidence, compile_safe=_compile_safe(model, settings)),
            [],
        ),
    ),
    Fixer(
        "hook-moves",
        HOOK_MOVE_RULES,
        FixSafety.UNSAFE,
        lambda model, settings: (
            plan_hook_moves(model, settings.min_confidence, compile_safe=_compile_safe(model, settings)),
            [],
        ),
    ),
    Fixer(  # after the hand-off fixer: the forks a consumer joins are its
        "fork-join",
        FORK_JOIN_RULES,
        FixSafety.UNSAFE,
        lambda model, settings: (
            plan_fork_joins(model, settings.min_confidence, compile_safe=_compile_safe(model, settings)),
            [],
        ),
    ),
    Fixer(
        "OFL204",
        ("OFL204",),
        FixSafety.SAFE,
        lambda model, settings: (plan_record_stream_fix(model, settings.min_confidence), []),
    ),
    Fixer(
        "OFL106",
        ("OFL106",),
        FixSafety.UNSAFE,
        lambda model, settings: (plan_pin_memory_fix(model, settings.min_confidence), []),
    ),
)
FIXABLE_RULES = tuple(sorted({rule for fixer in FIXERS for rule in fixer.rules}))


@dataclass(frozen=True)
class NotFixed:
    """A finding left after fixing, with the fixer's one-line reason for leaving it."""

    diagnostic: Diagnostic
    reason: str


@dataclass
class FileFix:
    path: str
    original: bytes
    fixed: bytes
    edits: list[Edit] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    strategies: list[str] = field(default_factory=list)
    remaining: list[Diagnostic] = field(default_factory=list)  # fixable findings left after fixing
    left: list[Diagnostic] = field(default_factory=list)  # every finding left (at the floor)
    not_fixed: list[NotFixed] = field(default_factory=list)  # left ones a fixer says why it left

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def compiles(data: bytes, path: str) -> bool:
    try:
        compile_quietly(decode_source(data), path, flags=0)
    except (SyntaxError, ValueError, DecodeError):
        return False
    return True


def result_problem(data: bytes, path: str, *, must_compile: bool = True) -> str | None:
    """Why fixed bytes are unacceptable, or None. They must parse (libcst), and compile when the
    original did: libcst accepts some code CPython refuses (a module-level `return`), and a fix
    is not to blame for that."""
    return _parsed_result(data, path, must_compile=must_compile)[1]


def _parsed_result(data: bytes, path: str, *, must_compile: bool) -> tuple[cst.Module | None, str | None]:
    """`result_problem`, with the tree it parsed when there is no problem (the next fixer's)."""
    try:
        module = cst.parse_module(data)
        if must_compile:
            compile_quietly(decode_source(data), path, flags=0)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, DecodeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, f"its result would not parse ({reason})"
    return module, None


def first_difference(before: bytes, after: bytes) -> int:
    """The 1-based line of `before` holding the first byte where `after` differs from it."""
    at = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), min(len(before), len(after)))
    return sum(1 for line in before[:at].splitlines(keepends=True) if line.endswith((b"\n", b"\r"))) + 1


def edited_spans(plan: StatementPlan, positions: Mapping[cst.CSTNode, CodeRange]) -> list[tuple[int, int]]:
    """The lines each planned change may rewrite: its anchor's, and the blank and comment lines
    above a statement anchor (an insertion before it moves them)."""
    spans = []
    for record in plan.records:
        where = positions.get(record.anchor)
        if where is not None:
            above = len(getattr(record.anchor, "leading_lines", ()))
            spans.append((max(1, where.start.line - above), where.end.line))
    return spans


def changed_outside(before: bytes, after: bytes, spans: list[tuple[int, int]]) -> int | None:
    """The first line of `before` outside the (1-based, inclusive) line `spans` that `after` does
    not keep byte for byte, or None. The stretches between the spans must appear in `after` in
    order, the first at its start and the last at its end: whatever the edits did, they did it
    in the gaps the spans leave."""
    lines = before.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    kept: list[tuple[int, int]] = []  # 0-based [first, end) line ranges outside every span
    cursor = 0
    for first, last in sorted(spans):
        if first - 1 > cursor:
            kept.append((cursor, first - 1))
        cursor = max(cursor, last)
    if cursor < len(lines):
        kept.append((cursor, len(lines)))
    position = 0
    for index, (first, end) in enumerate(kept):
        stretch = before[starts[first] : starts[end]]
        if index == 0 and first == 0:
            found = 0 if after.startswith(stretch) else -1
        elif end == len(lines) and index == len(kept) - 1:
            found = len(after) - len(stretch) if after.endswith(stretch) and len(after) - len(stretch) >= position else -1
        else:
            found = after.find(stretch, position)
        if found < 0:
            return first + 1
        position = found + len(stretch)
    return None


_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


def keep_lone_cr(after: str, before: str) -> str:
    """`after` with every line that ends in a lone CR in `before` still ending so. libcst writes a
    new line with the module's newline (`\n`): a blank line it inserts right after a kept line
    ending in a lone `\r` reads as that line's `\r\n`, so the kept line changed its ending and
    the inserted line was lost. Such a pair is written as the kept line and a blank line with the
    line ending of the place (`\r`)."""
    if "\r" not in before:
        return after
    old = set(_LINES.findall(before))
    new = _LINES.findall(after)
    out: list[str] = []
    for line in new:
        if line.endswith("\r\n") and line[:-1] in old and line not in old:
            out += [line[:-1], "\r"]
        else:
            out.append(line)
    return "".join(out)


def _check_settings(settings: FixSettings) -> FileSettings:
    return FileSettings(
        select=settings.select,
        capture_reachable=settings.capture_reachable,
        min_confidence=settings.min_confidence,
        seeds=settings.seeds,
        segmented_capture=settings.segmented_capture,
        hints=settings.hints,
        compile_safe=settings.compile_safe,
        fix_strategy=settings.strategy,
        capture_modes=settings.capture_modes,
    )


def left_after(data: bytes, path: str, settings: FixSettings) -> list[Diagnostic]:
    """The findings `check` shows on `data` at the settings' floor (what a fix left)."""
    report = check_source(data, path, _check_settings(settings))
    return [d for d in report.diagnostics if d.confidence.at_least(settings.min_confidence)]
