"""Analyse one file: decode, prefilter, parse, model, run rules, position, suppress.

Staged so that the expensive steps run only where they can matter: a file the prefilter
(`prefilter.py`: selected rules' tokens, then the capture gate) rejects is never parsed; positions
(a libcst metadata pass) and suppression comments are resolved only for files with at least one
finding. libcst is imported only when a file is parsed, so a run that parses nothing (a warm cache,
a tree with no candidate) never pays for the import.
"""

from __future__ import annotations

import io
import time
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from offlint.analysis.guard import nesting_problem
from offlint.analysis.prefilter import plan_for
from offlint.diagnostics import Diagnostic, ErrorKind, FileError, FileReport, Location

if TYPE_CHECKING:
    import libcst as cst

    from offlint.analysis.rule import Finding, Rule


@dataclass(frozen=True)
class FileSettings:
    """Everything the analysis of one file depends on (also the cache key's settings part)."""

    select: frozenset[str]
    capture_reachable: tuple[str, ...] = ()
    extra_tokens: tuple[str, ...] = field(default=())

    def key(self) -> str:
        return "|".join(
            [",".join(sorted(self.select)), ",".join(self.capture_reachable), ",".join(self.extra_tokens)]
        )


class DecodeError(Exception):
    pass


def decode_source(data: bytes) -> str:
    """Decode as Python does (BOM, coding cookie, else UTF-8); raise DecodeError on bad bytes."""
    if b"\x00" in data:
        raise DecodeError("binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise DecodeError(str(exc)) from exc
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        reason = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
        where = f" at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else ""
        raise DecodeError(f"not valid {encoding}{where}: {reason}") from exc
    return text.removeprefix("\ufeff")


def selected_rules(select: Iterable[str]) -> list[Rule]:
    from offlint.analysis.rules import all_rules

    registry = all_rules()
    return [registry[code]() for code in sorted(select) if code in registry]


def may_hold_hazard(text: str, settings: FileSettings) -> bool:
    """The prefilter: False only when no selected rule can fire anywhere in `text`."""
    if any(token in text for token in settings.extra_tokens):
        return True
    return plan_for(frozenset(settings.select), tuple(settings.capture_reachable)).accepts(text)


def parse_error(path: str, exc: Exception) -> FileError:
    import libcst as cst

    if isinstance(exc, cst.ParserSyntaxError):
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid syntax"
        return FileError(path, ErrorKind.SYNTAX, message, line=exc.raw_line)
    if isinstance(exc, RecursionError):
        return FileError(path, ErrorKind.TOO_DEEP, "code is nested too deeply to parse")
    return FileError(path, ErrorKind.INTERNAL, f"{type(exc).__name__}: {exc}".splitlines()[0])


def check_source(
    data: bytes,
    path: str,
    settings: FileSettings,
    *,
    prefiltered: bool = False,
    confirm_fixes: bool = True,
) -> FileReport:
    """Analyse one file's bytes. Never raises: failures become FileErrors on the report.

    `prefiltered`: the caller already ran the prefilter on this text and it passed.
    `confirm_fixes`: mark a diagnostic fixable only when `offlint fix` really removes it (the
    fixer itself turns this off when it re-checks its output).
    """
    report = FileReport(path=path)
    started = time.perf_counter()
    try:
        text = decode_source(data)
    except DecodeError as exc:
        report.errors.append(FileError(path, ErrorKind.UNDECODABLE, str(exc)))
        return report
    report.timings["decode"] = time.perf_counter() - started
    if not prefiltered:
        started = time.perf_counter()
        passed = may_hold_hazard(text, settings)
        report.timings["prefilter"] = time.perf_counter() - started
        if not passed:
            return report
    return analyse_text(text, path, settings, report, confirm_fixes=confirm_fixes)


def analyse_text(
    text: str, path: str, settings: FileSettings, report: FileReport, *, confirm_fixes: bool = True
) -> FileReport:
    """Parse, model, run the selected rules, position the findings (the libcst stages)."""
    started = time.perf_counter()
    import libcst as cst

    from offlint.analysis.model import ModelOptions, ModuleModel

    rules = selected_rules(settings.select)
    report.timings["import"] = time.perf_counter() - started
    if not rules:
        return report
    started = time.perf_counter()
    problem = nesting_problem(text)  # libcst would crash the process on these (SIGSEGV)
    report.timings["guard"] = time.perf_counter() - started
    if problem is not None:
        report.errors.append(FileError(path, ErrorKind.TOO_DEEP, problem))
        return report
    try:
        started = time.perf_counter()
        module = cst.parse_module(text)
        report.parsed = True
        report.timings["parse"] = time.perf_counter() - started
        started = time.perf_counter()
        model = ModuleModel(module, ModelOptions(capture_reachable=settings.capture_reachable))
        report.timings["model"] = time.perf_counter() - started
        findings: list[tuple[Rule, Finding]] = []
        for rule in rules:
            started = time.perf_counter()
            findings.extend((rule, f) for f in rule.find(model))
            report.timings[f"rule {rule.code}"] = time.perf_counter() - started
        if findings:
            started = time.perf_counter()
            report.diagnostics, report.suppressed = _diagnostics(path, text, module, findings)
            report.timings["position"] = time.perf_counter() - started
        if confirm_fixes and any(d.fixable for d in report.diagnostics):
            started = time.perf_counter()
            from offlint.fixing.availability import confirm_fix_availability

            report.diagnostics = confirm_fix_availability(model, settings, report.diagnostics)
            report.timings["fix availability"] = time.perf_counter() - started
    except Exception as exc:  # one bad file never stops the run; internal errors are reported
        report.diagnostics = []
        report.errors.append(parse_error(path, exc))
    return report


def _diagnostics(
    path: str, text: str, module: cst.Module, findings: list[tuple[Rule, Finding]]
) -> tuple[list[Diagnostic], int]:
    from offlint.analysis.positions import locate, whole_module_positions
    from offlint.catalogue import load_catalogue
    from offlint.suppression import resolve_pending, scan_comments, statement_spans

    catalogue = load_catalogue()
    lines = text.splitlines()
    suppressions = scan_comments(text)
    if suppressions.pending:  # own-line directives need every statement's span
        ranges = whole_module_positions(module)
        spans = statement_spans(module, {n: (r.start.line, r.end.line) for n, r in ranges.items()})
        resolve_pending(suppressions, spans, lines)
    else:
        ranges = locate(module, text, [finding.node for _, finding in findings])
    seen: set[tuple[str, int, int]] = set()
    found: list[Diagnostic] = []
    suppressed = 0
    for rule, finding in findings:
        where = ranges[finding.node]
        key = (rule.code, where.start.line, where.start.column)
        if key in seen:
            continue
        seen.add(key)
        if suppressions.suppresses(rule.code, where.start.line):
            suppressed += 1
            continue
        spec = catalogue[rule.code]
        found.append(
            Diagnostic(
                path=path,
                location=Location(
                    where.start.line, where.start.column + 1, where.end.line, where.end.column + 1
                ),
                code=rule.code,
                name=spec.name,
                message=spec.render_message(**finding.details),
                fix_title=spec.fix_title,
                fix_safety=spec.fix_safety,
                source_line=lines[where.start.line - 1] if where.start.line <= len(lines) else "",
            )
        )
    found.sort(key=lambda d: d.sort_key)
    return found, suppressed
