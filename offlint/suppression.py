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

Codes may be prefixes (`OFL1` covers OFL101-OFL107). Comments are found with `tokenize`, so a
`#` inside a string never counts.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

import libcst as cst

ALL = "*"
_DIRECTIVE = re.compile(
    r"#\s*offlint:\s*(?P<kind>ignore|file-ignore)\b(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE
)
# every directive holds one of these words (in a comment); a file without them has none
_ANY_DIRECTIVE = re.compile(r"offlint\s*:|noqa", re.IGNORECASE)
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


def scan_comments(source: str) -> Suppressions:
    """Find every directive; own-line ones stay pending until statements are known."""
    found = Suppressions()
    if _ANY_DIRECTIVE.search(source) is None:
        return found  # tokenizing costs more than the rest of positioning: only when needed
    file_codes: set[str] = set()
    previous_end_line = 0
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    try:
        for token in tokens:
            if token.type != tokenize.COMMENT:
                if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                    previous_end_line = token.end[0]
                continue
            line = token.start[0]
            own_line = previous_end_line < line
            directive = _DIRECTIVE.search(token.string)
            if directive is not None:
                codes = _codes(directive.group("codes"))
                if directive.group("kind").lower() == "file-ignore":
                    if own_line:
                        file_codes |= codes
                elif own_line:
                    found.pending[line] = codes
                else:
                    found.add_lines(line, line, codes)
                continue
            noqa = _NOQA.search(token.string)
            if noqa is not None and not own_line:
                found.add_lines(line, line, _codes(noqa.group("codes")))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # the parser already accepted the file; a tokenizer quirk only loses directives
    found.file_codes = frozenset(file_codes)
    return found


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
