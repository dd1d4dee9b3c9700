"""Inline suppression comments.

Grammar (also in README.md):

    # offlint: ignore[OFL101, OFL105]   trailing: covers its own line
                                        own line: covers the next statement - a whole simple
                                        statement, the header of an `if`/`with`/`for`/`while`/
                                        `try`, or a decorated `def`/`class` with its decorators
    # offlint: ignore                   the same, for every code
    # noqa: OFL101                      ruff/flake8 style, trailing only; bare `# noqa` = all
    # offlint: file-ignore[OFL105]      anywhere on its own line: covers the whole file
    # offlint: file-ignore              the whole file, every code
    # offlint: noqa                     the whole file, every code (ruff's `# ruff: noqa`)
    # offlint: noqa: OFL105             the whole file, those codes

Codes may be prefixes (`OFL1` covers OFL101-OFL107). Comments are found with `tokenize`, so a
`#` inside a string never counts.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

ALL = "*"
_DIRECTIVE = re.compile(
    r"#\s*offlint:\s*(?P<kind>ignore|file-ignore)\b(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE
)
# every directive holds one of these words (in a comment); a file without them has none
_ANY_DIRECTIVE = re.compile(r"offlint\s*:|noqa", re.IGNORECASE)
# ruff's file-level exemption (its `noqa` after `ruff:`), in offlint's name
_FILE_NOQA = re.compile(r"#\s*offlint:\s*noqa\b(?::\s*(?P<codes>[A-Z]+\d*(?:[\s,]+[A-Z]+\d*)*))?", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa\b(?::\s*(?P<codes>[A-Z]+\d+(?:[\s,]+[A-Z]+\d+)*))?", re.IGNORECASE)


def _codes(raw: str | None) -> frozenset[str]:
    if raw is None or not raw.strip():
        return frozenset({ALL})
    return frozenset(c.strip().upper() for c in re.split(r"[\s,]+", raw) if c.strip())


def _covers(codes: frozenset[str], code: str) -> bool:
    return ALL in codes or any(code.startswith(c) for c in codes)


@dataclass
class Suppressions:
    file_codes: frozenset[str] = frozenset()
    line_codes: dict[int, set[str]] = field(default_factory=dict)
    # own-line directives: comment line -> codes, resolved against statements later
    pending: dict[int, frozenset[str]] = field(default_factory=dict)

    def add_lines(self, first: int, last: int, codes: frozenset[str]) -> None:
        for line in range(first, last + 1):
            self.line_codes.setdefault(line, set()).update(codes)

    def suppresses(self, code: str, line: int) -> bool:
        if _covers(self.file_codes, code):
            return True
        codes = self.line_codes.get(line)
        return codes is not None and _covers(frozenset(codes), code)


@dataclass(frozen=True)
class Directive:
    """One suppression comment as written."""

    line: int  # the comment's line
    column: int  # where its `#` starts
    codes: frozenset[str]  # as written (upper case); {ALL} for a blanket directive
    scope: str  # "line" (trailing), "next" (own line: the next statement) or "file"
    style: str  # "offlint" or "noqa"
    text: str  # the whole comment token

    @property
    def blanket(self) -> bool:
        return ALL in self.codes


def directives(source: str) -> list[Directive]:
    """Every suppression comment of `source`, in order. A `# noqa` on its own line and a
    `file-ignore` after code are no directives (they cover nothing)."""
    found: list[Directive] = []
    if _ANY_DIRECTIVE.search(source) is None:
        return found  # tokenizing costs more than the rest of positioning: only when needed
    previous_end_line = 0
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    try:
        for token in tokens:
            if token.type != tokenize.COMMENT:
                if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                    previous_end_line = token.end[0]
                continue
            line, column = token.start
            own_line = previous_end_line < line
            directive = _DIRECTIVE.search(token.string)
            if directive is not None:
                codes = _codes(directive.group("codes"))
                if directive.group("kind").lower() == "file-ignore":
                    if own_line:
                        found.append(Directive(line, column, codes, "file", "offlint", token.string))
                else:
                    scope = "next" if own_line else "line"
                    found.append(Directive(line, column, codes, scope, "offlint", token.string))
                continue
            file_noqa = _FILE_NOQA.search(token.string)
            if file_noqa is not None:
                codes = _codes(file_noqa.group("codes"))
                found.append(Directive(line, column, codes, "file", "offlint", token.string))
                continue
            noqa = _NOQA.search(token.string)
            if noqa is not None and not own_line:
                found.append(Directive(line, column, _codes(noqa.group("codes")), "line", "noqa", token.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # the parser already accepted the file; a tokenizer quirk only loses directives
    return found


def scan_comments(source: str) -> Suppressions:
    """Find every directive; own-line ones stay pending until statements are known."""
    found = Suppressions()
    file_codes: set[str] = set()
    for directive in directives(source):
        if directive.scope == "file":
            file_codes |= directive.codes
        elif directive.scope == "next":
            found.pending[directive.line] = directive.codes
        else:
            found.add_lines(directive.line, directive.line, directive.codes)
    found.file_codes = frozenset(file_codes)
    return found


def covered_lines(
    directive: Directive, spans: list[tuple[int, int]], source_lines: list[str]
) -> tuple[int, int] | None:
    """The (first, last) lines an own-line or trailing directive covers (None for file-wide
    ones), as `resolve_pending` attaches them."""
    if directive.scope == "file":
        return None
    if directive.scope == "line":
        return directive.line, directive.line
    import bisect

    starts = [s for s, _ in spans]
    index = bisect.bisect_right(starts, directive.line)
    if index < len(spans):
        first, last = spans[index]
        between = source_lines[directive.line : first - 1]
        if all(line.strip().startswith(("#", "@")) for line in between):
            return first, last
    return directive.line + 1, directive.line + 1


def statement_spans(module: cst.Module, positions: dict[cst.CSTNode, tuple[int, int]]) -> list[tuple[int, int]]:
    """(first line, last covered line) of every statement an own-line directive can cover:
    a simple statement line whole, a compound statement's header (decorators included)."""
    spans: list[tuple[int, int]] = []

    class Statements(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            if node in positions:
                spans.append(positions[node])
            return False

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.BaseCompoundStatement) and node in positions:
                first, _ = positions[node]
                decorators = getattr(node, "decorators", ())
                if decorators and decorators[0] in positions:
                    first = positions[decorators[0]][0]
                body = getattr(node, "body", None)
                header_end = first
                if isinstance(body, cst.IndentedBlock) and body in positions:
                    header_end = positions[body][0] - 1  # the block starts at its first statement
                elif body is not None and body in positions:
                    header_end = positions[body][0]
                spans.append((first, max(first, header_end)))
            return super().on_visit(node)

    module.visit(Statements())
    spans.sort()
    return spans


def resolve_pending(found: Suppressions, spans: list[tuple[int, int]], source_lines: list[str]) -> None:
    """Attach each own-line directive to the statement that follows it."""
    if not found.pending:
        return
    import bisect

    starts = [s for s, _ in spans]
    for comment_line, codes in found.pending.items():
        index = bisect.bisect_right(starts, comment_line)
        # skip statements that start on the comment's own line (not possible for own-line)
        if index < len(spans):
            first, last = spans[index]
            # only comment lines may sit between directive and target: a blank line or code
            # (another statement, the rest of an enclosing expression) breaks the link
            between = source_lines[comment_line:first - 1]
            if all(line.strip().startswith(("#", "@")) for line in between):
                found.add_lines(first, last, codes)
                continue
        found.add_lines(comment_line + 1, comment_line + 1, codes)


# ---------------------------------------------------------------------------- adding directives

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")


def _split_lines(text: str) -> list[str]:
    """The physical lines of `text`, each with its own line break (as Python counts lines)."""
    lines = [m.group(0) for m in _LINE.finditer(text)]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _commentable_lines(text: str) -> set[int]:
    """Lines whose end is outside any string or continuation: a comment may be appended there."""
    lines: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                lines.add(token.start[0])
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return set()
    return lines


@dataclass
class AddedDirectives:
    text: str
    added: int  # directives written or extended
    unplaced: list[tuple[int, str]]  # (line, code) no directive could be placed for


def add_directives(
    text: str,
    wanted: dict[int, set[str]],
    spans_of: Callable[[str], list[tuple[int, int]]] | None,
    *,
    _again: bool = True,
) -> AddedDirectives:
    """`text` with a `# offlint: ignore[CODES]` directive covering each (line, codes) of `wanted`
    (what `check --add-noqa` writes), every other byte kept.

    The directive goes at the end of the line, after any comment already there; an existing
    trailing `# offlint: ignore[...]` gets the codes added instead. A line that ends inside a
    string or a backslash continuation cannot hold a comment: the statement holding it gets an
    own-line directive above it (`spans_of(text)` gives statement spans; None: no such file
    placement). The result is re-scanned: a (line, code) it does not suppress is `unplaced`, and
    a placement that would change the code's syntax tree is not made at all.
    """
    import ast

    from offlint.analysis.guard import compile_quietly
    from offlint.analysis.prefilter import without_literals

    lines = _split_lines(text)
    commentable = _commentable_lines(text)
    existing = {d.line: d for d in directives(text) if d.scope == "line" and d.style == "offlint"}
    try:
        spans = spans_of(text) if spans_of is not None else []
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        spans = []
    above: dict[int, set[str]] = {}  # statement first line -> codes of an own-line directive
    unplaced: list[tuple[int, str]] = []
    added = 0
    for line, codes in sorted(wanted.items()):
        if line < 1 or line > len(lines):
            unplaced.extend((line, code) for code in sorted(codes))
            continue
        directive = existing.get(line)
        if directive is not None:
            if directive.blanket or all(_covers(directive.codes, code) for code in codes):
                continue
            lines[line - 1] = _extend_directive(lines[line - 1], directive, codes)
            added += 1
        elif line in commentable:
            body = lines[line - 1].rstrip("\r\n")
            ending = lines[line - 1][len(body) :]
            kept = body.rstrip(" \t")
            lines[line - 1] = f"{kept}  # offlint: ignore[{', '.join(sorted(codes))}]{ending}"
            added += 1
        else:
            holding = [(first, last) for first, last in spans if first <= line <= last]
            if not holding:
                unplaced.extend((line, code) for code in sorted(codes))
                continue
            first = max(holding)[0]
            above.setdefault(first, set()).update(codes)
    for first in sorted(above, reverse=True):  # bottom up: earlier insertions shift no later line
        target = lines[first - 1]
        indent = target[: len(target) - len(target.lstrip(" \t"))]
        body = target.rstrip("\r\n")
        ending = target[len(body) :] or "\n"
        lines.insert(first - 1, f"{indent}# offlint: ignore[{', '.join(sorted(above[first]))}]{ending}")
        added += 1
    new_text = "".join(lines)
    try:
        # without their literal tables (the one parse budget): a directive is never placed in one
        same_tree = ast.dump(compile_quietly(without_literals(new_text))) == ast.dump(
            compile_quietly(without_literals(text))
        )
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        same_tree = True  # not CPython syntax: only comments were touched, re-scanned below
    if not same_tree:  # pragma: no cover - comments never change the tree; a guard, not a path
        return AddedDirectives(text, 0, [(line, code) for line, codes in wanted.items() for code in codes])
    found = scan_comments(new_text)
    if found.pending:
        try:
            new_spans = spans_of(new_text) if spans_of is not None else []
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            new_spans = []
        resolve_pending(found, new_spans, [line.rstrip("\r\n") for line in _split_lines(new_text)])
    inserted = sorted(above)
    failed: list[tuple[int, str]] = []
    for line, codes in wanted.items():
        moved = line + bisect_count(inserted, line)
        failed.extend((line, code) for code in codes if not found.suppresses(code, moved))
    if failed and added and _again:
        # a directive the re-scan does not see (comments unreadable: a file `tokenize` refuses
        # but CPython compiles) would be written and then asked for again on every run: only
        # the ones that work are written
        keep = {line: {c for c in codes if (line, c) not in failed} for line, codes in wanted.items()}
        again = add_directives(text, {line: codes for line, codes in keep.items() if codes}, spans_of, _again=False)
        return AddedDirectives(again.text, again.added, sorted(set(again.unplaced) | set(unplaced) | set(failed)))
    return AddedDirectives(new_text, added, sorted(set(unplaced) | set(failed)))


def bisect_count(sorted_lines: list[int], line: int) -> int:
    """How many own-line directives were inserted at or above `line`."""
    import bisect

    return bisect.bisect_right(sorted_lines, line)


def _extend_directive(text: str, directive: Directive, codes: set[str]) -> str:
    """`text` (one line) with `codes` added to the bracket of its trailing directive."""
    match = _DIRECTIVE.search(directive.text)
    assert match is not None and match.group("codes") is not None
    merged = sorted(set(directive.codes) | codes)
    comment = directive.text[: match.start("codes")] + ", ".join(merged) + directive.text[match.end("codes") :]
    start = directive.column
    return text[:start] + comment + text[start + len(directive.text) :]
