"""OFL901 unused-suppression: a suppression comment that suppresses nothing (ruff's RUF100).

A directive is used when a finding of a code it names lies on a line it covers. Findings are
those of *every* rule, run here on the same model whatever the selection and confidence floor:
a suppression kept for a rule that is off in one run, or for a finding below the floor, is not
stale. Only offlint's own codes are judged (`# noqa: E501, OFL105` reports at most OFL105), and
blanket directives (`# noqa`, `# offlint: ignore`) are never reported: they cover this rule too.

The engine hands a rule only the model, so the source text and positions come from what the
model was built from: the skeleton (`model.source_of` is its method) or the libcst module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from offlint.analysis.model import ModuleModel
from offlint.analysis.rule import Finding, Rule
from offlint.diagnostics import Confidence
from offlint.suppression import ALL, Directive, covered_lines, directives

Span = tuple[int, int, int, int]
# an offlint code or prefix as a directive names it (`OFL105`, `ofl1`)
_NAMES_OUR_CODE = re.compile(r"(?i)ofl\d")


@dataclass
class _Source:
    text: str
    locate: Callable[[cst.CSTNode], Span | None]
    statement_spans: Callable[[], list[tuple[int, int]]]


def _source_of(model: ModuleModel) -> _Source | None:
    """The text the model was built from and a locator of its nodes, or None when unknown."""
    from offlint.analysis.skeleton import Skeleton

    skeleton = getattr(model.source_of, "__self__", None)
    if isinstance(skeleton, Skeleton):
        from offlint.analysis.positions import ast_statement_spans

        tree = skeleton.tree
        return _Source(skeleton.text, skeleton.span, lambda: ast_statement_spans(tree))
    if model.source_of is None and isinstance(model.module, cst.Module):
        from offlint.analysis.positions import libcst_statement_spans, whole_module_positions

        module = model.module
        ranges = whole_module_positions(module)

        def locate(node: cst.CSTNode) -> Span | None:
            where = ranges.get(node)
            return None if where is None else (where.start.line, where.start.column, where.end.line, where.end.column)

        return _Source(module.code, locate, lambda: libcst_statement_spans(module))
    return None


def _own_codes(directive: Directive) -> list[str]:
    """The codes of `directive` that name offlint rules or prefixes (`OFL105`, `OFL1`)."""
    return sorted(code for code in directive.codes if code.startswith("OFL"))


def _matches(code: str, finding_code: str) -> bool:
    return finding_code.startswith(code)


class UnusedSuppression(Rule):
    code = "OFL901"
    # a directive it judges names an offlint code: the prefilter parses no file without one
    # (the many files whose directives only name ruff's codes stay unparsed); any case
    tokens = ("OFL", "ofl", "Ofl")

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        source = _source_of(model)
        if source is None or not _NAMES_OUR_CODE.search(source.text):
            return  # no directive can name an offlint code: spare the tokenizer (most parsed files)
        judged = [d for d in directives(source.text) if ALL not in d.codes and _own_codes(d)]
        if not judged:
            return
        from offlint.analysis.rules import all_rules

        known = list(all_rules())
        found: list[tuple[str, int]] = []  # (code, line) of every rule's findings
        for code, rule_class in all_rules().items():
            if code == self.code:
                continue
            for finding in rule_class().find(model):
                where = source.locate(finding.node)
                if where is not None:
                    found.append((code, where[0]))
        lines = source.text.splitlines()
        spans: list[tuple[int, int]] | None = None
        anchors = _Anchors(model, source)
        reports: dict[int, list[str]] = {}
        for directive in judged:
            if directive.scope == "next" and spans is None:
                spans = source.statement_spans()
            covered = covered_lines(directive, spans or [], lines)
            unused: list[str] = []
            for code in _own_codes(directive):
                if not any(_matches(code, rule) for rule in known):
                    unused.append(f"{code} (no such rule)")
                elif not any(
                    _matches(code, finding_code) and (covered is None or covered[0] <= line <= covered[1])
                    for finding_code, line in found
                ):
                    unused.append(code)
            if not unused:
                continue
            anchor_line = directive.line if covered is None or directive.scope == "line" else covered[0]
            if directive.scope == "file":
                if spans is None:
                    spans = source.statement_spans()
                anchor_line = next((first for first, _ in spans if first > directive.line), spans[0][0] if spans else 0)
            reports.setdefault(anchor_line, []).append(_describe(directive, unused))
        for line, described in sorted(reports.items()):
            node = anchors.at(line)
            if node is not None:
                yield Finding(node, {"detail": "; ".join(described)}, confidence=Confidence.HIGH)


def _describe(directive: Directive, unused: list[str]) -> str:
    comment = directive.text.strip()
    names = ", ".join(unused)
    if directive.scope == "line":
        return f"`{comment}`: no {names} finding on this line"
    if directive.scope == "next":
        return f"`{comment}` (line {directive.line}): no {names} finding in the statement it covers"
    return f"`{comment}` (line {directive.line}): no {names} finding in this file"


class _Anchors:
    """The node a report on a line is attached to: the outermost small statement or expression
    that starts first on the line (its position is the report's), else the innermost statement
    holding the line. Never blocks, statement lines, or names that are part of a bigger construct
    (a `def`'s name, a parameter, a keyword, an attribute, an import): the skeleton gives those
    the position of what holds them, and a report must not move with the parser."""

    def __init__(self, model: ModuleModel, source: _Source) -> None:
        self.starting: dict[int, tuple[int, cst.CSTNode]] = {}
        self.holding: list[tuple[int, int, int, cst.CSTNode]] = []
        lines = source.text.splitlines()
        nodes = list(_outside_strings(model.module))
        borrowed = {id(name) for node in nodes for name in _names_within(node)}
        for node in nodes:
            small = isinstance(node, cst.BaseSmallStatement)
            if id(node) in borrowed or not (
                small or isinstance(node, (cst.BaseExpression, cst.BaseCompoundStatement))
            ):
                continue
            where = source.locate(node)
            if where is None:
                continue
            line, column, end_line, _ = where
            if not isinstance(node, cst.BaseCompoundStatement) and not _parenthesised(lines, where):
                best = self.starting.get(line)
                if best is None or column < best[0]:  # pre-order: the outermost comes first
                    self.starting[line] = (column, node)
            if small or isinstance(node, cst.BaseCompoundStatement):
                self.holding.append((0 if small else 1, line, end_line, node))

    def at(self, line: int) -> cst.CSTNode | None:
        start = self.starting.get(line)
        if start is not None:
            return start[1]
        inner = [(rank, -first, node) for rank, first, last, node in self.holding if first <= line <= last]
        return min(inner, key=lambda item: item[:2])[2] if inner else None


def _names_within(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The names a construct holds that are no expression of their own."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Param)):
        yield node.name
    elif isinstance(node, cst.Arg) and node.keyword is not None:
        yield node.keyword
    elif isinstance(node, cst.Attribute):
        yield node.attr
    elif isinstance(node, (cst.ImportAlias, cst.AsName, cst.NameItem)) or (
        isinstance(node, cst.ImportFrom) and node.module is not None
    ):
        from offlint.analysis.syntax import walk

        part = node.module if isinstance(node, cst.ImportFrom) else node
        assert part is not None
        yield from (inner for inner in walk(part) if isinstance(inner, (cst.Name, cst.Attribute)))


def _outside_strings(module: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node in pre-order, strings (and what an f-string holds) left out: the parsers split
    implicitly concatenated and formatted strings differently."""
    from offlint.analysis.syntax import child_nodes

    stack = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BaseString):
            continue
        yield node
        stack.extend(reversed(child_nodes(node)))


def _parenthesised(lines: list[str], where: Span) -> bool:
    """True for a node in parentheses of its own (or the sole argument of a call): one parser
    counts them in its range, the other does not, so either way such a node is no anchor (what
    is inside it can be). The brackets may stand on other lines than the node."""
    line, column, end_line, end_column = where
    first = lines[line - 1] if 0 < line <= len(lines) else ""
    last = lines[end_line - 1] if 0 < end_line <= len(lines) else ""
    if first[column : column + 1] == "(" and last[end_column - 1 : end_column] == ")":
        return True
    return _previous_character(lines, line, column) == "(" and _next_character(lines, end_line, end_column) == ")"


def _previous_character(lines: list[str], line: int, column: int) -> str:
    """The last non-blank character before (line, column), looking back over earlier lines."""
    text = lines[line - 1][:column] if 0 < line <= len(lines) else ""
    while True:
        stripped = text.rstrip()
        if stripped or line <= 1:
            return stripped[-1:]
        line -= 1
        text = _without_comment(lines[line - 1])


def _without_comment(text: str) -> str:
    """A line less its trailing comment, when no quote comes before the `#` (close enough for
    looking back over the lines of an expression)."""
    hash_at = text.find("#")
    if hash_at < 0 or "'" in text[:hash_at] or '"' in text[:hash_at]:
        return text
    return text[:hash_at]


def _next_character(lines: list[str], line: int, column: int) -> str:
    """The first non-blank character from (line, column) on, looking ahead over later lines;
    comments are skipped."""
    text = lines[line - 1][column:] if 0 < line <= len(lines) else ""
    while True:
        stripped = text.lstrip()
        if stripped and not stripped.startswith("#"):
            return stripped[:1]
        if line >= len(lines):
            return ""
        line += 1
        text = lines[line - 1]
