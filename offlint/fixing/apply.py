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
from offlint.analysis.deep_stack import on_deep_stack
from offlint.analysis.engine import (
    NOT_REPRODUCED,
    DecodeError,
    FileSettings,
    check_source,
    decode_source,
    parse_error,
    refusal_error,
)
from offlint.analysis.guard import compile_quietly, refusal
from offlint.analysis.model import ModelOptions, ModuleModel
from offlint.diagnostics import (
    DEFAULT_MIN_CONFIDENCE,
    Confidence,
    Diagnostic,
    ErrorKind,
    FileError,
    Fix,
    FixSafety,
    TextEdit,
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


def fix_source(data: bytes, path: str, settings: FixSettings) -> FileFix:
    """Fix one file's bytes. Never raises: failures become FileErrors on the result, and a file
    whose fixing failed midway is left as it was read."""
    try:
        return on_deep_stack(lambda: _fix_source(data, path, settings))
    except Exception as exc:  # the file's error boundary: one bad file never stops the run
        failed = FileFix(path=path, original=data, fixed=data)
        failed.errors.append(parse_error(path, exc))
        return failed


def _fix_source(data: bytes, path: str, settings: FixSettings) -> FileFix:
    """check -> apply the non-overlapping fixes `check` attached to the findings it shows ->
    re-check, until a check attaches nothing (bounded). No fixer runs here: every change is a
    finding's own fix, planned by `check` from that finding's facts."""
    from offlint.fixing.availability import FIX_LOOP_AVAILABILITY

    result = FileFix(path=path, original=data, fixed=data)
    try:
        text = decode_source(data)
    except DecodeError as exc:
        result.errors.append(FileError(path, ErrorKind.UNDECODABLE, str(exc)))
        return result
    refused = refusal(text)  # libcst would crash the process on these (SIGSEGV), or take minutes
    if refused is not None:
        result.errors.append(refusal_error(path, refused))
        return result
    check_settings = _check_settings(settings)
    original_compiles: bool | None = None
    current = data
    shown: list[Diagnostic] = []
    failed: set[tuple[str, tuple[TextEdit, ...]]] = set()  # fixes whose result did not parse
    for round_number in range(MAX_ROUNDS + 1):
        report = check_source(current, path, check_settings, fixes=FIX_LOOP_AVAILABILITY)
        if report.errors:
            if round_number == 0:
                result.errors.extend(report.errors)
                return result
            result.errors.append(  # the fixes wrote what check cannot read: nothing is written
                FileError(path, ErrorKind.INTERNAL, f"not fixed: the fixed text cannot be checked ({report.errors[0].message})")
            )
            current = data
            result.edits.clear()
            result.strategies.clear()
            shown = []
            break
        shown = [d for d in report.diagnostics if d.confidence.at_least(settings.min_confidence)]
        offered = _offered(shown, settings.select, failed)
        if round_number == 0 and not offered and not report.parsed:
            try:  # the prefilter passed over it: a file `fix` cannot read is still reported
                cst.parse_module(data)
            except Exception as exc:
                result.errors.append(parse_error(path, exc))
                return result
        if round_number == 0:
            unread = next((d.not_fixed for d in shown if d.not_fixed and d.not_fixed.startswith(NOT_REPRODUCED)), None)
            if unread is not None:
                line = first_difference(data, cst.parse_module(data).bytes)
                result.errors.append(FileError(path, ErrorKind.INTERNAL, f"not fixed: {unread}", line=line))
                return result
        if not offered:
            break
        if round_number == MAX_ROUNDS:
            # a fix that does not reach a fixed point is not a fix: writing its last round would
            # grow the file on every run. Nothing is written; the file is reported.
            result.errors.append(
                FileError(
                    path,
                    ErrorKind.INTERNAL,
                    f"not fixed: the fixes still changed the file after {MAX_ROUNDS} rounds (no fixed point); not written",
                )
            )
            current = data
            result.edits.clear()
            result.strategies.clear()
            shown = [d for d in check_source(data, path, check_settings).diagnostics if d.confidence.at_least(settings.min_confidence)]
            break
        if original_compiles is None:
            original_compiles = compiles(data, path)
        applied = _apply_round(current, path, _non_overlapping(offered), original_compiles, failed, result)
        if applied is None:
            break
        current = applied
    result.edits.sort(key=lambda e: (e.line, e.rule))
    result.fixed = current
    result.left = shown
    result.remaining = [d for d in shown if d.fix is not None]
    result.not_fixed = [NotFixed(d, d.not_fixed) for d in shown if d.not_fixed]
    return result


def _apply_round(
    current: bytes,
    path: str,
    chosen: list[tuple[Fix, list[Diagnostic]]],
    must_compile: bool,
    failed: set[tuple[str, tuple[TextEdit, ...]]],
    result: FileFix,
) -> bytes | None:
    """`current` with the chosen fixes (planned on it, touching no common line) applied together;
    a fix whose result does not parse is dropped, reported, and not offered again. None when
    nothing applied."""

    def accept(fixes: list[tuple[Fix, list[Diagnostic]]]) -> bytes | None:
        fixed = apply_text_edits(current, tuple(e for fix, _ in fixes for e in fix.edits))
        if fixed is None or (must_compile and not compiles(fixed, path)):
            return None
        for fix, carriers in fixes:
            result.edits.extend(_reported_edits(fix, carriers))
            result.notes.extend(n for n in fix.notes if n not in result.notes)
            if fix.fixer.startswith("offloader-"):
                result.strategies.append(fix.fixer.removeprefix("offloader-"))
        return fixed

    together = accept(chosen)
    if together is not None:
        return together
    good = []
    for fix, carriers in chosen:  # which one broke it: each alone
        fixed = apply_text_edits(current, fix.edits)
        problem = "its edits do not fit the text" if fixed is None else result_problem(fixed, path, must_compile=must_compile)
        # (libcst's own parse, only here: the re-check parses what is applied)
        if problem is None:
            good.append((fix, carriers))
            continue
        failed.add((fix.fixer, fix.edits))
        result.errors.append(FileError(path, ErrorKind.INTERNAL, f"dropped the {fix.fixer} fix: {problem}"))
    return accept(good[:1]) if good else None


def _offered(
    shown: list[Diagnostic], select: frozenset[str], failed: set[tuple[str, tuple[TextEdit, ...]]]
) -> list[tuple[Fix, list[Diagnostic]]]:
    """The fixes carried by the findings shown whose rules are selected, each once, with the
    findings that carry it, in the order of their first edit."""
    fixes: dict[tuple[str, tuple[TextEdit, ...]], tuple[Fix, list[Diagnostic]]] = {}
    for d in shown:
        if d.fix is None or d.code not in select or (d.fix.fixer, d.fix.edits) in failed:
            continue
        fixes.setdefault((d.fix.fixer, d.fix.edits), (d.fix, []))[1].append(d)
    return sorted(fixes.values(), key=lambda item: (item[0].edits[0].line, item[0].edits[0].column) if item[0].edits else (0, 0))


def _non_overlapping(offered: list[tuple[Fix, list[Diagnostic]]]) -> list[tuple[Fix, list[Diagnostic]]]:
    """Fixes whose edits touch no line another chosen fix touches (ruff's rule), in order."""
    chosen: list[tuple[Fix, list[Diagnostic]]] = []
    taken: list[tuple[int, int]] = []
    for fix, carriers in offered:
        spans = [(e.line, max(e.end_line, e.line)) for e in fix.edits]
        if any(a <= d and c <= b for a, b in spans for c, d in taken):
            continue
        chosen.append((fix, carriers))
        taken.extend(spans)
    return chosen


def apply_text_edits(data: bytes, edits: tuple[TextEdit, ...]) -> bytes | None:
    """`data` with whole-line `edits` (planned on its decoded text's lines) applied, encoded as
    it was (its encoding, its BOM); None when they do not fit the text."""
    import io
    import tokenize

    text = decode_source(data)
    lines = text.splitlines(keepends=True)
    for edit in sorted(edits, key=lambda e: (e.line, e.end_line), reverse=True):
        if edit.column != 1 or edit.end_column != 1 or not 1 <= edit.line <= edit.end_line <= len(lines) + 1:
            return None
        lines[edit.line - 1 : edit.end_line - 1] = [edit.content]
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    out = "".join(lines)
    if encoding == "utf-8-sig":
        return b"\xef\xbb\xbf" + out.encode("utf-8")
    return out.encode(encoding)


def _reported_edits(fix: Fix, carriers: list[Diagnostic]) -> list[Edit]:
    codes = list(dict.fromkeys(d.code for d in carriers))
    return [
        Edit(
            rule=codes[0],
            also_fixes=tuple(codes[1:]),
            title=fix.title,
            safety=fix.safety,
            line=edit.line,
            end_line=max(edit.line, edit.end_line - 1),
            fixer=fix.fixer,
        )
        for edit in fix.edits
    ]
