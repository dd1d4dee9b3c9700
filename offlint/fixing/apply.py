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
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from offlint.analysis.build import build_model
from offlint.analysis.callgraph import Seed
from offlint.analysis.deep_stack import on_deep_stack
from offlint.analysis.engine import (
    DecodeError,
    FileSettings,
    check_source,
    decode_source,
    parse_error,
    refusal_error,
)
from offlint.analysis.guard import compile_quietly, refusal
from offlint.analysis.model import ModelOptions, ModuleModel
from offlint.analysis.positions import locate
from offlint.diagnostics import (
    DEFAULT_MIN_CONFIDENCE,
    Confidence,
    Diagnostic,
    ErrorKind,
    FileError,
    FixSafety,
)
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
from offlint.fixing.summary import restore, summarise, table_lines

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

    def model_options(self) -> ModelOptions:
        return ModelOptions(
            capture_reachable=self.capture_reachable, seeds=self.seeds, segmented_capture=self.segmented_capture
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
    return plan_offloader_fix(model, settings.strategy, compile_safe=_compile_safe(model, settings))


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
        "OFL204", ("OFL204",), FixSafety.SAFE, lambda model, _: (plan_record_stream_fix(model), [])
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


def _fix_source(original: bytes, path: str, settings: FixSettings) -> FileFix:
    result = FileFix(path=path, original=original, fixed=original)
    try:
        text = decode_source(original)
    except DecodeError as exc:
        result.errors.append(FileError(path, ErrorKind.UNDECODABLE, str(exc)))
        return result
    # libcst never sees a long literal table (`summary.py`): the fixers plan on the file with its
    # rows emptied, and the rows are put back at the end. The budgets apply to what is parsed.
    summary = summarise(original, text)
    data = original if summary is None else summary.data
    refused = refusal(text if summary is None else summary.text)  # libcst would crash (SIGSEGV), or take minutes
    del text
    if refused is not None:
        result.errors.append(refusal_error(path, refused))
        return result
    # a fix acts on what `check` shows at the same confidence floor, never on more (and on the
    # file as `check` reads it: its analysis budget is the file's)
    checked = check_source(original, path, _check_settings(settings))
    if checked.errors:
        result.errors.extend(checked.errors)
        return result
    shown = {d.code for d in checked.diagnostics if d.confidence.at_least(settings.min_confidence)}
    fixers = [f for f in FIXERS if f.selected(settings.select) and any(rule in shown for rule in f.rules)]
    if not fixers:
        try:  # nothing to fix; a file `fix` cannot read losslessly is still reported
            cst.parse_module(data)
        except Exception as exc:
            result.errors.append(parse_error(path, exc))
        result.left = [d for d in checked.diagnostics if d.confidence.at_least(settings.min_confidence)]
        return result
    dropped: set[str] = set()
    round_trip_checked = False  # libcst gives the original back byte for byte
    original_compiles: bool | None = None  # asked only when a fixer produced something
    current = data
    # the text last parsed, its tree and model: valid for every fixer until one changes the text
    # (on a large file a parse and a model cost seconds, and they used to be redone per fixer)
    parsed: tuple[bytes, cst.Module, ModuleModel | None] | None = None
    for round_number in range(MAX_ROUNDS):
        if round_number and current != data:
            # the fixed text can show findings the original did not (a rewritten method now
            # records on its allocating stream): their fixers join, or the next run would fix
            # what this one left (a write that is not a fixed point)
            now = check_source(current, path, _check_settings(settings))
            shown_now = {d.code for d in now.diagnostics if d.confidence.at_least(settings.min_confidence)}
            fixers = [
                f for f in FIXERS if f in fixers or (f.selected(settings.select) and any(r in shown_now for r in f.rules))
            ]
        progressed = False
        for fixer in fixers:
            if fixer.name in dropped:
                continue
            try:
                if parsed is None or parsed[0] is not current:
                    module = cst.parse_module(current)
                    if not round_trip_checked and module.bytes != data:
                        line = first_difference(data, module.bytes)
                        result.errors.append(
                            FileError(
                                path,
                                ErrorKind.INTERNAL,
                                "not fixed: libcst does not reproduce this file byte for byte"
                                f" (line {line} would change: a form feed, lone carriage return or"
                                " stray BOM there?)",
                                line=line,
                            )
                        )
                        return result
                    round_trip_checked = True  # the later parses are of offlint's own output
                    parsed = (current, module, None)
                _, module, model = parsed
                if model is None:
                    model = build_model(module, settings.model_options())
                    parsed = (current, module, model)
                plan, used = fixer.plan(model, settings)
            except Exception as exc:  # one bad file never stops the run
                parsed = None  # a model a fixer failed on is not handed to the next one
                if current == data:
                    result.errors.append(parse_error(path, exc))
                    return result
                result.errors.append(
                    FileError(path, ErrorKind.INTERNAL, f"{fixer.name} fix failed: {exc}")
                )
                dropped.add(fixer.name)
                continue
            for note in plan.notes:
                if note not in result.notes:
                    result.notes.append(note)
            if not plan:
                continue
            try:
                # where the changed statements are, not the whole module's positions (a full
                # regeneration of a large file, seconds each time a fixer applies)
                positions = locate(module, decode_source(current), [record.anchor for record in plan.records])
                applied = plan.apply(module)
                fixed = applied.bytes
                if b"\r" in current:
                    fixed = keep_lone_cr(applied.code, module.code).encode(applied.encoding)
            except Exception as exc:  # e.g. RecursionError past the deep stack's limit
                result.errors.append(
                    FileError(path, ErrorKind.INTERNAL, f"dropped the {fixer.name} fix: {parse_error(path, exc).message}")
                )
                dropped.add(fixer.name)
                continue
            if original_compiles is None:
                original_compiles = compiles(data, path)
            fixed_module, problem = _parsed_result(fixed, path, must_compile=original_compiles)
            if problem is None:
                outside = changed_outside(current, fixed, edited_spans(plan, positions))
                if outside is not None:
                    problem = f"it would change line {outside}, outside the statements it edits"
            if problem is not None:
                result.errors.append(
                    FileError(
                        path,
                        ErrorKind.INTERNAL,
                        f"dropped the {fixer.name} fix: {problem}",
                    )
                )
                dropped.add(fixer.name)
                continue
            if fixed == current:
                continue
            result.edits.extend(
                plan.edits(
                    dict(positions),
                    fixer.safety,
                    fixer.name if not used else f"offloader-{used[0]}",
                )
            )
            result.strategies.extend(used)
            current = fixed
            if fixed_module is not None:  # parsed just now: the next fixer plans on it
                parsed = (current, fixed_module, None)
            progressed = True
        if not progressed:
            break
    else:
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
    if summary is None or current == data:
        result.fixed = original if current == data else current
    else:
        restored = restore(summary, original, current)
        if restored is None:
            result.errors.append(
                FileError(
                    path,
                    ErrorKind.INTERNAL,
                    f"not fixed: the fixes would change a literal table (lines {table_lines(summary)}); not written",
                )
            )
            current = data
            result.edits.clear()
            result.strategies.clear()
        result.fixed = original if restored is None else restored
    result.edits.sort(key=lambda e: (e.line, e.rule))
    report = check_source(result.fixed, path, _check_settings(settings))  # the lines as written
    result.left = [d for d in report.diagnostics if d.confidence.at_least(settings.min_confidence)]
    result.remaining = [d for d in result.left if d.fixable]
    try:
        result.not_fixed = _reasons(current, result.left, fixers, settings)
    except Exception:  # the reasons are a courtesy: never lose the fix over them
        result.not_fixed = []
    return result


def _reasons(
    data: bytes, left: list[Diagnostic], fixers: list[Fixer], settings: FixSettings
) -> list[NotFixed]:
    """Why each fixer leaves the findings of its rules that are still there: the fixers plan
    once more on the final text and say, per finding, what stopped them."""
    wanted = {(d.code, d.location.line): d for d in left if any(d.code in f.rules for f in fixers)}
    if not wanted:
        return []
    module = cst.parse_module(data)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    model = build_model(module, settings.model_options())
    found: dict[tuple[str, int], NotFixed] = {}
    for fixer in fixers:
        try:
            plan, _ = fixer.plan(model, settings)
        except Exception:  # a fixer that cannot plan gives no reason; its error is reported
            continue
        for code, node, reason in plan.not_fixed:
            where = positions.get(node)
            key = (code, where.start.line if where is not None else 0)
            if key not in wanted:
                continue
            if key not in found:
                found[key] = NotFixed(wanted[key], reason)
            elif reason not in found[key].reason:  # each fixer that looked says why it left it
                found[key] = NotFixed(wanted[key], f"{found[key].reason}; {reason}")
    return sorted(found.values(), key=lambda n: n.diagnostic.sort_key)
