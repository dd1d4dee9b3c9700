"""Analyse one file: decode, prefilter, parse, model, run rules, position, suppress.

Staged so that the expensive steps run only where they can matter: a file the prefilter
(`prefilter.py`: selected rules' tokens, then the capture gate) rejects is never parsed; the rest
is parsed by CPython into a libcst-typed skeleton (`skeleton.py`), or by libcst itself (the
reference, `front_end="libcst"`); positions and suppression comments are resolved only for files
with at least one finding. libcst is imported only when a file is analysed, so a run that analyses
nothing (a warm cache, a tree with no candidate) never pays for the import.
"""

from __future__ import annotations

import ast
import codecs
import contextlib
import dataclasses
import gc
import io
import time
import tokenize
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from offlint.analysis.callgraph import marks_of_unanalysed, reexports_of
from offlint.analysis.guard import (
    DEPTH_MESSAGES,
    analysis_budget,
    analysis_refusal,
    compile_quietly,
    depth_problem,
    libcst_budget,
    libcst_refusal,
    parse_with_cpython,
    refusal,
)
from offlint.analysis.prefilter import (
    blank_literal_tables,
    literal_table_runs,
    plan_for,
    without_literals,
)
from offlint.diagnostics import (
    DEFAULT_MIN_CONFIDENCE,
    Confidence,
    Diagnostic,
    ErrorKind,
    FileError,
    FileReport,
    Location,
)

if TYPE_CHECKING:
    import libcst as cst

    from offlint.analysis.callgraph import Seed
    from offlint.analysis.guard import Refusal
    from offlint.analysis.model import ModuleModel
    from offlint.analysis.program import ModelOptions
    from offlint.analysis.rule import Finding, Rule


class FixConfirmer(Protocol):
    """Says which diagnostics `offlint fix` really removes, so `check` marks only those fixable
    ([*]). The fixing layer implements it and the pipeline hands it in: analysis never imports
    fixing."""

    def may_plan(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> bool:
        """On a skeleton model: False when no fix is planned for these, so no libcst parse is needed."""
        ...

    def confirm(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        """The diagnostics, fixable only where a fix is planned for them on this lossless model."""
        ...


@dataclass(frozen=True)
class FileSettings:
    """Everything the analysis of one file depends on (also the cache key's settings part)."""

    select: frozenset[str]
    capture_reachable: tuple[str, ...] = ()
    extra_tokens: tuple[str, ...] = field(default=())
    # "skeleton" (CPython's parser, libcst node types) or "libcst" (the reference); see analyse_text
    front_end: str = "skeleton"
    # functions other modules reach (callgraph.py): part of the key, a file is analysed anew when
    # what reaches it changes
    seeds: tuple[Seed, ...] = ()
    # what the semantic core knows of receivers the per-file kinds cannot type: (function,
    # receiver source, kind value); part of the key
    hints: tuple[tuple[str, str, str], ...] = ()
    # another module of the tree captures in segments (callgraph.SEGMENTED_CAPTURE)
    segmented_capture: bool = False
    # findings below it are hidden from the report; not part of the key (cached results hold all)
    min_confidence: Confidence = DEFAULT_MIN_CONFIDENCE
    # `[tool.offlint.fix] compile-safe` (None: auto): the fixes `check` attaches are `fix`'s
    compile_safe: bool | None = None
    # `--strategy` / `[tool.offlint.fix] strategy`: the offloader rewrite `check` attaches
    fix_strategy: str = "auto"
    # `[tool.offlint] capture-modes`: how the engine may capture; a fix `check` attaches is sound
    # under each (fixing/capture_modes.py). Default: every mode.
    capture_modes: tuple[str, ...] = ("whole", "piecewise", "segmented-sglang", "segmented-vllm")

    def key(self) -> str:
        return self._key

    @cached_property
    def _key(self) -> str:  # asked once per file: computed once per settings
        return "|".join(
            [
                ",".join(sorted(self.select)),
                ",".join(self.capture_reachable),
                ",".join(self.extra_tokens),
                self.front_end,
                ";".join(f"{s.qualname}={s.confidence.value}:{s.reason}:{s.handed}" for s in self.seeds),
                ";".join("=".join(h) for h in self.hints),
                "segmented" if self.segmented_capture else "",
                "" if self.compile_safe is None else f"compile-safe={self.compile_safe}",
                "" if self.fix_strategy == "auto" else f"strategy={self.fix_strategy}",
                "modes=" + ",".join(self.capture_modes),
                # a result under other budgets (too-large, or no fix) is not this run's
                f"budgets={analysis_budget()},{libcst_budget()}",
            ]
        )


class DecodeError(Exception):
    pass


# CPython reads source only in ASCII-compatible encodings (PEP 263): UTF-16 and UTF-32 files are
# refused, whatever their byte-order mark or coding cookie says. Their marks, longest first (UTF-32
# LE's starts with UTF-16 LE's).
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
_WIDE_CODECS = frozenset({"utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"})
_NOT_SOURCE = "which Python does not accept as source code (PEP 263: ASCII-compatible encodings only); save it as UTF-8"


def _wide_encoding(data: bytes) -> str | None:
    """"UTF-16" or "UTF-32" for text in one of them (a byte-order mark, or, without one, ASCII text
    with a NUL byte next to every character), else None."""
    for bom, name in _WIDE_BOMS:
        if data.startswith(bom):
            return name
    head = data[:256]
    for text, zeros in ((head[0::2], head[1::2]), (head[1::2], head[0::2])):  # LE, BE
        if len(zeros) >= 4 and zeros.count(0) == len(zeros) and text.count(0) == 0:
            return "UTF-16"
    return None


def decode_source(data: bytes) -> str:
    """Decode as Python does (BOM, coding cookie, else UTF-8); raise DecodeError on bad bytes."""
    wide = _wide_encoding(data)
    if wide is not None:
        raise DecodeError(f"{wide} text, {_NOT_SOURCE}")
    if b"\x00" in data:
        raise DecodeError("binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise DecodeError(str(exc)) from exc
    with contextlib.suppress(LookupError):
        if codecs.lookup(encoding).name in _WIDE_CODECS:
            raise DecodeError(f"the coding declaration says {encoding!r}, {_NOT_SOURCE}")
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
    if settings.seeds or any(token in text for token in settings.extra_tokens):
        return True  # another module reaches a function defined here: its calls carry the reach on
    return plan_for(frozenset(settings.select), tuple(settings.capture_reachable)).accepts(text)


def parse_error(path: str, exc: Exception) -> FileError:
    import libcst as cst

    if isinstance(exc, cst.ParserSyntaxError):
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid syntax"
        return FileError(path, ErrorKind.SYNTAX, message, line=exc.raw_line, column=exc.editor_column)
    if isinstance(exc, RecursionError):
        return FileError(path, ErrorKind.TOO_DEEP, "code is nested too deeply to parse")
    return FileError(path, ErrorKind.INTERNAL, f"{type(exc).__name__}: {exc}".splitlines()[0])


def refusal_error(path: str, refused: Refusal) -> FileError:
    kinds = {"syntax": ErrorKind.SYNTAX, "too-large": ErrorKind.TOO_LARGE}
    kind = kinds.get(refused.kind, ErrorKind.TOO_DEEP)
    return FileError(path, kind, refused.message, line=refused.line, column=refused.column)


def check_source(
    data: bytes,
    path: str,
    settings: FileSettings,
    *,
    prefiltered: bool = False,
    fixes: FixConfirmer | None = None,
) -> FileReport:
    """Analyse one file's bytes. Never raises: failures become FileErrors on the report.

    `prefiltered`: the caller already ran the prefilter on this text and it passed.
    `fixes`: marks a diagnostic fixable only when `offlint fix` really removes it (the pipeline
    hands in the fixing layer's; without one a diagnostic keeps its rule's fix safety, which is
    what `fix` wants when it re-checks its own output).
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
            # no rule can fire here, but a file that is not Python is an error of the run
            # whatever it holds (as ruff reports one): CPython's compile, no libcst
            error = syntax_error_of(text, path)
            if error is not None:
                report.errors.append(error)
                return report
            report.index = marks_of_unanalysed(text, path)
            return report
    return analyse_text(text, path, settings, report, fixes=fixes)


def analyse_text(
    text: str,
    path: str,
    settings: FileSettings,
    report: FileReport,
    *,
    fixes: FixConfirmer | None = None,
) -> FileReport:
    """Parse, model, run the selected rules, position the findings.

    `settings.front_end == "skeleton"` (what `check` uses): CPython's parser and a libcst-typed skeleton
    (`skeleton.py`); libcst itself parses only files with fixable findings, to confirm the fix.
    A file CPython cannot parse (a syntax error, syntax newer than this Python) or that the
    skeleton cannot answer for takes the libcst path, which is the reference (`"libcst"`).
    """
    rules = selected_rules(settings.select)
    if not rules:
        return report
    too_large = analysis_refusal(text)  # parsing and modelling cost memory in proportion
    if too_large is not None:
        report.errors.append(refusal_error(path, too_large))
        return report
    job = _Job(text, path, settings, rules, report, fixes)
    with _gc_paused():
        return _analyse(job)


@dataclass
class _Job:
    """One file's analysis: its text and where the results go."""

    text: str
    path: str
    settings: FileSettings
    rules: list[Rule]
    report: FileReport
    fixes: FixConfirmer | None

    def options(self) -> ModelOptions:
        from offlint.analysis.program import ModelOptions

        return ModelOptions(
            capture_reachable=self.settings.capture_reachable,
            seeds=self.settings.seeds,
            segmented_capture=self.settings.segmented_capture,
            hints=self.settings.hints,
        )


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while one file is analysed. Parsing makes hundreds of thousands
    of objects, and each allocation-triggered collection walks all the live ones: that was 45% of
    the parse and skeleton time. The trees are acyclic (freed by reference counting); the few
    cycles of the model are collected once collection resumes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _analyse(job: _Job) -> FileReport:
    text, path, report = job.text, job.path, job.report
    if job.settings.front_end == "skeleton":
        started = time.perf_counter()
        light = blank_literal_tables(text)  # same lines and columns, without the literal tables
        tree, problem = parse_with_cpython(light)
        if tree is None and problem is None and light is not text:
            tree, problem = parse_with_cpython(text)
        del light
        if tree is not None and problem is None:
            problem = depth_problem(text, tree)
        report.timings["parse"] = time.perf_counter() - started
        if problem is not None:
            report.errors.append(FileError(path, ErrorKind.TOO_DEEP, problem))
            return report
        if tree is not None:
            from offlint.analysis.skeleton import SkeletonGap, TooLongChain

            try:
                return _analyse_skeleton(job, tree)
            except TooLongChain as exc:
                report.diagnostics, report.suppressed = [], 0
                report.errors.append(FileError(path, ErrorKind.TOO_DEEP, str(exc)))
                return report
            except (SkeletonGap, RecursionError):
                report.diagnostics, report.suppressed = [], 0  # the libcst path decides
            except Exception as exc:  # one bad file never stops the run
                report.diagnostics = []
                report.errors.append(parse_error(path, exc))
                return report
    result = _analyse_libcst(job)
    if any(e.kind is ErrorKind.SYNTAX for e in result.errors):
        cpython = _cpython_syntax_error(text)
        if cpython is not None:  # CPython's place and words, not libcst's recovery point
            result.errors = [
                FileError(path, ErrorKind.SYNTAX, cpython[2], line=cpython[0], column=cpython[1])
                if e.kind is ErrorKind.SYNTAX
                else e
                for e in result.errors
            ]
    return result


def syntax_error_of(text: str, path: str) -> FileError | None:
    """The syntax error CPython finds in `text` (compiled to bytecode: cheaper than building a
    tree), as an error of the run at `path:line:col`; None when it compiles, or when the text is
    beyond the analysis budget or nested too deeply for the compiler (those are refused where
    they are analysed, not here)."""
    from offlint.analysis.guard import compile_quietly

    if analysis_refusal(text) is not None:
        return None
    try:
        compile_quietly(text, flags=0)
    except SyntaxError as exc:
        message = (str(exc.msg).splitlines() or ["invalid syntax"])[0]
        if any(m in message for m in DEPTH_MESSAGES):
            return None
        return FileError(path, ErrorKind.SYNTAX, message, line=exc.lineno or 1, column=exc.offset)
    except (ValueError, OverflowError, RecursionError, MemoryError):
        return None
    return None


def _cpython_syntax_error(text: str) -> tuple[int, int | None, str] | None:
    """(line, column, message) of CPython's SyntaxError for `text`, None when it compiles."""
    try:
        compile_quietly(text)
    except SyntaxError as exc:
        message = (str(exc.msg).splitlines() or ["invalid syntax"])[0]
        return exc.lineno or 1, exc.offset, message
    except (ValueError, OverflowError, RecursionError, MemoryError):
        return None
    return None


def _analyse_skeleton(job: _Job, tree: ast.Module) -> FileReport:
    from offlint.analysis.build import build_model
    from offlint.analysis.skeleton import build_skeleton

    report = job.report
    started = time.perf_counter()
    skeleton = build_skeleton(job.text, tree)
    report.parsed = True
    report.timings["skeleton"] = time.perf_counter() - started
    started = time.perf_counter()
    model = build_model(skeleton.module, job.options(), source_of=skeleton.source_of, imports=skeleton.imports)
    report.timings["model"] = time.perf_counter() - started
    try:
        findings = _run_rules(job.rules, model, report)
        report.index += reexports_of(job.text, job.path)
        if findings:
            started = time.perf_counter()
            from offlint.analysis.positions import ast_statement_spans

            def locate_all(nodes: list[cst.CSTNode]) -> dict[cst.CSTNode, tuple[int, int, int, int]]:
                return {node: _span_of(skeleton.span(node), node) for node in nodes}

            report.diagnostics, report.suppressed = _diagnostics(
                job.path, job.text, findings, locate_all, lambda: ast_statement_spans(tree)
            )
            report.timings["position"] = time.perf_counter() - started
        if job.fixes is not None and any(d.fixable for d in report.diagnostics):
            _confirm_fixes_with_libcst(job, job.fixes, model)
    finally:
        model.dispose()
    return report


def _confirm_fixes_with_libcst(job: _Job, fixes: FixConfirmer, skeleton_model: ModuleModel) -> None:
    """The fixers plan on a lossless tree: parse the file with libcst, as `fix` would, unless no
    fixer gets as far as writing code on the skeleton."""
    import libcst

    from offlint.analysis.build import build_model

    report = job.report
    started = time.perf_counter()
    settings = job.settings
    runs = literal_table_runs(job.text)  # libcst parses the text without its tables, as `fix` does
    source = libcst_source(job.text, runs)
    if not _fixable_at_floor(report.diagnostics, settings.min_confidence):
        _leave_unconfirmed_below_floor(report, settings.min_confidence)
    elif not fixes.may_plan(skeleton_model, settings, report.diagnostics) or libcst_refusal(source):
        # over the libcst budget the findings stand; `fix` reports the file as too large
        report.diagnostics = [d.without_fix() for d in report.diagnostics]
    else:
        refused = refusal(source)
        if refused is not None:
            report.errors.append(refusal_error(job.path, refused))
            report.diagnostics = []
            return
        try:
            parsed = libcst.parse_module(source)
        except libcst.ParserSyntaxError:
            # CPython parsed it (this is the skeleton path): a libcst limit (~4 000 adjacent
            # string literals), not a syntax error. The findings stand; `fix` cannot edit it.
            report.diagnostics = [d.without_fix() for d in report.diagnostics]
            report.timings["fix availability"] = time.perf_counter() - started
            return
        summarised = source is not job.text
        full = build_model(parsed, job.options())
        report.diagnostics = [
            d.without_fix() if d.fix is not None and summarised and _edits_a_table(d, runs) else d
            for d in _confirmed(fixes, full, job.settings, report.diagnostics, source)
        ]
        del source
        full.dispose()
    report.timings["fix availability"] = time.perf_counter() - started


NOT_REPRODUCED = "libcst does not reproduce this file byte for byte"


def _confirmed(
    fixes: FixConfirmer, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic], text: str
) -> list[Diagnostic]:
    """The fixes confirmed on `model`; none where libcst does not give the text back as read
    (a form feed at a line start, a lone CR at the end): a fix's edits would land on lines the
    file does not have, and `fix` writes nothing there."""
    code = model.module.code
    if code != text:
        at = next((i for i, (a, b) in enumerate(zip(text, code, strict=False)) if a != b), min(len(text), len(code)))
        line = text.count("\n", 0, at) + 1
        reason = (
            f"{NOT_REPRODUCED} (line {line} would change: a form feed, lone carriage return or stray BOM there?)"
        )
        return [d.left_because(reason) if d.fixable else d for d in diagnostics]
    return fixes.confirm(model, settings, diagnostics)


def libcst_source(text: str, runs: list[tuple[int, int]]) -> str:
    """What libcst is handed for `text`: without its literal tables' rows (`runs`) when the rest
    still compiles (every line keeps its number), else the text itself. `fix` does the same on
    the file's bytes (`fixing/summary.py`)."""
    return without_literals(text, runs) if runs else text


def _edits_a_table(diagnostic: Diagnostic, runs: list[tuple[int, int]]) -> bool:
    """A fix whose edits replace, remove or insert lines inside a table `fix` left out of its
    parse: `fix` refuses it (`summary.restore`), so `check` does not offer it."""
    assert diagnostic.fix is not None
    for edit in diagnostic.fix.edits:
        first, last = edit.line - 1, edit.end_line - 1
        if any((first < high and last > low) or low < first < high for low, high in runs):
            return True
    return False


def _leave_unconfirmed_below_floor(report: FileReport, floor: Confidence) -> None:
    """No fixable finding at the floor: confirming those below it would cost a libcst parse for
    findings this run hides. They keep their rule's offer, and the report says at which floor
    fixes were settled, so a run at a lower floor (the cache holds every tier) analyses anew."""
    report.fixes_confirmed_at = floor


def _fixable_at_floor(diagnostics: list[Diagnostic], floor: Confidence) -> bool:
    """A fixable finding `check` shows at this floor: `fix` acts on those only, so a file whose
    fixable findings all lie below it has nothing to confirm (and no libcst parse to pay)."""
    return any(d.fixable and d.confidence.at_least(floor) for d in diagnostics)


def _span_of(span: tuple[int, int, int, int] | None, node: cst.CSTNode) -> tuple[int, int, int, int]:
    if span is None:
        from offlint.analysis.skeleton import SkeletonGap

        raise SkeletonGap(f"no source position for a reported {type(node).__name__}")
    return span


def _run_rules(rules: list[Rule], model: ModuleModel, report: FileReport) -> list[tuple[Rule, Finding]]:
    from offlint.analysis.module_index import module_index
    from offlint.analysis.reachability import finding_reach
    from offlint.analysis.rule import findings_of

    report.index = module_index(model)
    findings: list[tuple[Rule, Finding]] = []
    for rule in rules:
        started = time.perf_counter()
        for finding in findings_of(rule, model):
            confidence, reason = finding_reach(model, finding.node, rule.explains_reachability)
            confidence = finding.confidence or confidence
            note = f"capture-reachable: {reason}" if reason and rule.explains_reachability else ""
            findings.append((rule, dataclasses.replace(finding, confidence=confidence, note=note or finding.note)))
        report.timings[f"rule {rule.code}"] = time.perf_counter() - started
    return findings


def _analyse_libcst(job: _Job) -> FileReport:
    """The reference path: libcst's own parser (also what `fix` analyses)."""
    text, path, settings, report = job.text, job.path, job.settings, job.report
    started = time.perf_counter()
    import libcst

    from offlint.analysis.build import build_model

    report.timings["import"] = time.perf_counter() - started
    started = time.perf_counter()
    runs = literal_table_runs(text)
    source = libcst_source(text, runs)  # the one budget: no literal tables
    refused = refusal(source)  # libcst would crash the process on these (SIGSEGV), or take minutes
    report.timings["guard"] = time.perf_counter() - started
    if refused is not None:
        report.errors.append(refusal_error(path, refused))
        return report
    try:
        started = time.perf_counter()
        module = libcst.parse_module(source)
        report.parsed = True
        report.timings["parse"] = report.timings.get("parse", 0.0) + time.perf_counter() - started
        started = time.perf_counter()
        model = build_model(module, job.options())
        report.timings["model"] = time.perf_counter() - started
        findings = _run_rules(job.rules, model, report)
        report.index += reexports_of(job.text, job.path)
        if findings:
            started = time.perf_counter()
            from offlint.analysis.positions import libcst_locator, libcst_statement_spans

            report.diagnostics, report.suppressed = _diagnostics(
                # positions in the parsed text are the file's: blanking keeps every line and column
                path, text, findings, libcst_locator(module, source), lambda: libcst_statement_spans(module, source)
            )
            report.timings["position"] = time.perf_counter() - started
        if job.fixes is not None and any(d.fixable for d in report.diagnostics):
            started = time.perf_counter()
            if _fixable_at_floor(report.diagnostics, settings.min_confidence):
                report.diagnostics = [
                    d.without_fix() if d.fix is not None and source is not text and _edits_a_table(d, runs) else d
                    for d in _confirmed(job.fixes, model, settings, report.diagnostics, source)
                ]
            else:
                _leave_unconfirmed_below_floor(report, settings.min_confidence)
            report.timings["fix availability"] = time.perf_counter() - started
        model.dispose()
    except Exception as exc:  # one bad file never stops the run; internal errors are reported
        report.diagnostics = []
        report.errors.append(parse_error(path, exc))
    return report


Locator = Callable[[list["cst.CSTNode"]], dict["cst.CSTNode", tuple[int, int, int, int]]]


def _diagnostics(
    path: str,
    text: str,
    findings: list[tuple[Rule, Finding]],
    locate: Locator,
    statement_spans: Callable[[], list[tuple[int, int]]],
) -> tuple[list[Diagnostic], int]:
    """Diagnostics for the findings: positions (1-based lines, 0-based columns from `locate`),
    messages from the catalogue, duplicates and suppressed findings dropped."""
    from offlint.analysis.skeleton import source_lines
    from offlint.catalogue import load_catalogue
    from offlint.suppression import resolve_pending, scan_comments

    catalogue = load_catalogue()
    lines = source_lines(text)
    suppressions = scan_comments(text)
    if suppressions.pending:  # own-line directives need every statement's span
        resolve_pending(suppressions, statement_spans(), lines)
    ranges = locate([finding.node for _, finding in findings])
    seen: set[tuple[str, int, int]] = set()
    found: list[Diagnostic] = []
    suppressed = 0
    for rule, finding in findings:
        line, column, end_line, end_column = ranges[finding.node]
        key = (rule.code, line, column)
        if key in seen:
            continue
        seen.add(key)
        if suppressions.suppresses(rule.code, line):
            suppressed += 1
            continue
        spec = catalogue[rule.code]
        found.append(
            Diagnostic(
                path=path,
                location=Location(line, column + 1, end_line, end_column + 1),
                code=rule.code,
                name=spec.name,
                message=spec.render_message(**finding.details),
                fix_title=spec.fix_title,
                fix_safety=spec.fix_safety,
                source_line=lines[line - 1] if line <= len(lines) else "",
                note=finding.note or None,
                confidence=finding.confidence or Confidence.HIGH,  # set by _run_rules
            )
        )
    found.sort(key=lambda d: d.sort_key)
    return found, suppressed
