"""`fix`'s loop: check, apply the non-overlapping fixes `check` attached to the findings it
shows, re-check, until a check attaches nothing (bounded). Its own module so that the fixing
plans (`apply.py`) and the per-finding confirmation (`availability.py`) stay free of each other."""

from __future__ import annotations

import libcst as cst

from offlint.analysis.deep_stack import on_deep_stack
from offlint.analysis.engine import (
    NOT_REPRODUCED,
    DecodeError,
    check_source,
    decode_source,
    parse_error,
    refusal_error,
)
from offlint.analysis.guard import refusal
from offlint.diagnostics import Diagnostic, ErrorKind, FileError, Fix, TextEdit
from offlint.fixing.apply import (
    MAX_ROUNDS,
    FileFix,
    FixSettings,
    NotFixed,
    _check_settings,
    compiles,
    first_difference,
    result_problem,
)
from offlint.fixing.availability import FIX_LOOP_AVAILABILITY
from offlint.fixing.edits import Edit
from offlint.fixing.summary import summarise


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
    result = FileFix(path=path, original=data, fixed=data)
    try:
        text = decode_source(data)
    except DecodeError as exc:
        result.errors.append(FileError(path, ErrorKind.UNDECODABLE, str(exc)))
        return result
    # libcst never sees a long literal table (`summary.py`): its budget counts what it would
    # parse, the file without the tables' rows (check's confirmation parses the same text, and
    # no fix it offers edits inside a table, so the fixes apply to the file as read)
    summary = summarise(data, text)
    light = data if summary is None else summary.data
    refused = refusal(text if summary is None else summary.text)  # libcst would crash (SIGSEGV), or take minutes
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
                cst.parse_module(light)
            except Exception as exc:
                result.errors.append(parse_error(path, exc))
                return result
        if round_number == 0:
            unread = next((d.not_fixed for d in shown if d.not_fixed and d.not_fixed.startswith(NOT_REPRODUCED)), None)
            if unread is not None:
                line = first_difference(light, cst.parse_module(light).bytes)
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
