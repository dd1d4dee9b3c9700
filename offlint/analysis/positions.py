"""Line/column ranges for the few nodes that are reported, and statement spans for own-line
suppression comments: from libcst trees (the reference path) or from CPython's ast (the skeleton
path, where every skeleton node keeps its ast node's positions).

libcst's PositionProvider regenerates the whole module with position tracking, which cost more
than the parse on large files (0.77 s on DeepSpeed's stage3.py). Findings are few, so positions
are computed only for the top-level statements that hold them: each is regenerated alone and
shifted by its start line, which CPython's `ast` (a C parser, ~10x faster than libcst) gives.
Anything unusual falls back to the whole-module provider.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Collection, Iterator, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from offlint.analysis.guard import compile_quietly
from offlint.analysis.skeleton import is_small_statement, source_lines
from offlint.analysis.syntax import walk


def whole_module_positions(module: cst.Module) -> dict[cst.CSTNode, CodeRange]:
    return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))


# A line holding only whitespace and a backslash continuation (fuzz input #32621). libcst's
# tokenizer folds it into the next line and keeps neither: its tree (and its code) lacks that
# line, and rewrites the next line's indentation as the block's. Every position libcst gives
# after it is one line early (and off by the indentation difference on the folded line).
_BLANK_CONTINUATION = re.compile(r"^[ \t\f]*\\(?:\r\n|\r|\n)", re.MULTILINE)
_INDENT = re.compile(r"[ \t\f]*")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")  # lines as Python's tokenizer ends them

LineMap = list[tuple[int, int]]  # per line of libcst's code (0-based): (line of the text, column shift)


def folded_lines(module: cst.Module, text: str) -> LineMap | None:
    """Where each line of libcst's code for `module` is in `text`, when `text` holds lines libcst
    folded away (a blank line continued by a backslash); None when libcst's lines are the text's."""
    if "\\" not in text or _BLANK_CONTINUATION.search(text) is None:
        return None
    code = module.code
    if code == text:
        return None
    return align_folded(code, text)


def align_folded(code: str, text: str) -> LineMap | None:
    """`folded_lines` for libcst's `code` of `text`: every line of `code` is a line of `text`, or,
    right after folded continuation lines, the next line of `text` with another indentation.
    None when the two differ in any other way (positions are then libcst's own)."""
    code_lines = _LINE.findall(code)
    text_lines = _LINE.findall(text)
    mapping: LineMap = []
    at = 0
    for line in code_lines:
        folded = False
        while at < len(text_lines) and text_lines[at] != line and _BLANK_CONTINUATION.fullmatch(text_lines[at]):
            at += 1
            folded = True
        if at >= len(text_lines):
            return None
        original = text_lines[at]
        if original == line:
            mapping.append((at, 0))
        elif folded and original.lstrip(" \t\f") == line.lstrip(" \t\f"):
            shift = len(_INDENT.match(original).group()) - len(_INDENT.match(line).group())  # type: ignore[union-attr]
            mapping.append((at, shift))
        else:
            return None
        at += 1
    if any(not _BLANK_CONTINUATION.fullmatch(rest) for rest in text_lines[at:]):
        return None
    return mapping


def _mapped(position: CodePosition, lines: LineMap) -> CodePosition:
    if position.line - 1 >= len(lines):
        return position
    line, shift = lines[position.line - 1]
    return CodePosition(line + 1, max(0, position.column + shift))


def _map_ranges(ranges: dict[cst.CSTNode, CodeRange], lines: LineMap) -> dict[cst.CSTNode, CodeRange]:
    return {node: CodeRange(_mapped(r.start, lines), _mapped(r.end, lines)) for node, r in ranges.items()}


def _start_lines(body: list[ast.stmt]) -> list[int]:
    """First line (decorators included) of each statement, one per libcst statement."""
    starts: list[int] = []
    for stmt in body:
        line = stmt.lineno
        decorators = getattr(stmt, "decorator_list", None)
        if decorators:
            line = min(line, *(d.lineno for d in decorators))
        if not starts or starts[-1] != line:  # `a; b` is one libcst statement
            starts.append(line)
    return starts


def _units(
    statements: Sequence[cst.BaseStatement], ast_body: list[ast.stmt], wanted: set[int]
) -> Iterator[tuple[cst.BaseStatement, int]] | None:
    """(statement, first line) of the smallest statements holding wanted nodes: methods rather
    than their whole class."""
    starts = _start_lines(ast_body)
    if len(starts) != len(statements):
        return None
    units: list[tuple[cst.BaseStatement, int]] = []
    for statement, first_line, tree in zip(statements, starts, _group(ast_body), strict=True):
        inside = {id(n) for n in walk(statement)} & wanted
        if not inside:
            continue
        if (
            isinstance(statement, cst.ClassDef)
            and isinstance(statement.body, cst.IndentedBlock)
            and isinstance(tree, ast.ClassDef)
            and id(statement) not in inside
        ):
            deeper = _units(list(statement.body.body), tree.body, inside)
            if deeper is not None:
                units.extend(deeper)
                continue
        units.append((statement, first_line))
    return iter(units)


def _group(body: list[ast.stmt]) -> list[ast.stmt]:
    """One ast statement per libcst statement (the first of `a; b`)."""
    grouped: list[ast.stmt] = []
    last_line = -1
    for stmt in body:
        decorators = getattr(stmt, "decorator_list", None)
        line = min(stmt.lineno, *(d.lineno for d in decorators)) if decorators else stmt.lineno
        if line != last_line:
            grouped.append(stmt)
            last_line = line
    return grouped


def _real(position: CodePosition, shift: int, mini_lines: list[str], source_lines: list[str]) -> CodePosition:
    """Map a position in a statement regenerated alone back to the file. Such a statement loses
    its enclosing indentation on block lines (continuation lines keep theirs), so the length
    difference of the line is the column shift."""
    line = position.line + shift
    inner = mini_lines[position.line - 1] if position.line <= len(mini_lines) else ""
    outer = source_lines[line - 1] if line <= len(source_lines) else ""
    return CodePosition(line, position.column + max(0, len(outer) - len(inner)))


def locate(module: cst.Module, text: str, nodes: Collection[cst.CSTNode]) -> dict[cst.CSTNode, CodeRange]:
    """Ranges for `nodes` (and everything in the statements holding them), in `text`'s lines."""
    folded = folded_lines(module, text)
    if folded is not None:
        return _map_ranges(whole_module_positions(module), folded)
    try:
        tree = compile_quietly(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return whole_module_positions(module)
    wanted = set(map(id, nodes))
    units = _units(list(module.body), tree.body, wanted)
    if units is None:
        return whole_module_positions(module)
    lines_of_source = source_lines(text)
    ranges: dict[cst.CSTNode, CodeRange] = {}
    for statement, first_line in units:
        alone = statement.with_changes(leading_lines=())
        mini = cst.Module(
            body=[alone],  # type: ignore[list-item]  # a BaseStatement is one of those two
            header=[],
            footer=[],
            default_indent=module.default_indent,
            default_newline=module.default_newline,
        )
        mini_lines = source_lines(mini.code)
        shift = first_line - 1
        for node, where in MetadataWrapper(mini, unsafe_skip_copy=True).resolve(PositionProvider).items():
            target = statement if node is alone else node
            ranges[target] = CodeRange(
                _real(where.start, shift, mini_lines, lines_of_source),
                _real(where.end, shift, mini_lines, lines_of_source),
            )
    if any(node not in ranges for node in nodes):  # be exact, not clever
        return whole_module_positions(module)
    return ranges


Span = tuple[int, int, int, int]  # line, column, end line, end column (1-based lines, 0-based columns)


def libcst_locator(module: cst.Module, text: str) -> Callable[[list[cst.CSTNode]], dict[cst.CSTNode, Span]]:
    def locate_nodes(nodes: list[cst.CSTNode]) -> dict[cst.CSTNode, Span]:
        ranges = locate(module, text, nodes)
        return {
            node: (r.start.line, r.start.column, r.end.line, r.end.column)
            for node in nodes
            for r in (ranges[node],)
        }

    return locate_nodes


def libcst_statement_spans(module: cst.Module, text: str | None = None) -> list[tuple[int, int]]:
    from offlint.suppression import statement_spans

    ranges = whole_module_positions(module)
    folded = folded_lines(module, text) if text is not None else None
    if folded is not None:
        ranges = _map_ranges(ranges, folded)
    return statement_spans(module, {n: (r.start.line, r.end.line) for n, r in ranges.items()})


def ast_statement_spans(tree: ast.Module) -> list[tuple[int, int]]:
    """`suppression.statement_spans` from CPython's tree: a line of simple statements whole
    (`a; b` is one), a compound statement's header with its decorators."""
    spans: list[tuple[int, int]] = []

    def block(body: list[ast.stmt]) -> None:
        line_end = -1
        for stmt in body:
            if is_small_statement(stmt):
                end = stmt.end_lineno or stmt.lineno
                if spans and stmt.lineno == line_end:
                    spans[-1] = (spans[-1][0], end)
                else:
                    spans.append((stmt.lineno, end))
                line_end = end
                continue
            line_end = -1
            compound(stmt)

    def compound(stmt: ast.stmt) -> None:
        decorators = getattr(stmt, "decorator_list", None) or []
        first = min([stmt.lineno, *(d.lineno for d in decorators)])
        inner = getattr(stmt, "body", None) or []
        if isinstance(stmt, ast.Match):
            header_end = stmt.cases[0].pattern.lineno - 1 if stmt.cases else stmt.lineno
        elif inner and inner[0].lineno > stmt.lineno:
            inner_first = min([inner[0].lineno, *(d.lineno for d in getattr(inner[0], "decorator_list", []))])
            header_end = inner_first - 1
        else:
            header_end = stmt.lineno
        spans.append((first, max(first, header_end)))
        for name in ("body", "orelse", "finalbody"):
            value = getattr(stmt, name, None)
            if value:
                block(value)
        for handler in getattr(stmt, "handlers", None) or []:
            block(handler.body)
        for case in getattr(stmt, "cases", None) or []:
            block(case.body)

    block(tree.body)
    spans.sort()
    return spans
