"""Refuse, before libcst sees it, source nested so deeply that parsing it would crash the process.

libcst's native parser recurses on the C stack: a few thousand nested brackets, unary operators,
`elif`s or chained `and`s overflow it and the whole process dies with SIGSEGV - no exception to
catch. Long operator chains are also super-linear (3 000 `a + a + ...` take seconds). CPython's
own parser guards its recursion and raises instead, so it is the arbiter: code CPython refuses as
too deep cannot run anywhere, and is reported as `too-deeply-nested` without being parsed.

CPython's parse costs about a tenth of libcst's, so it runs only when a cheap screen says the
text could be deep: a big file, a very long line, deep bracket nesting or indentation, or enough
operators or trailers for one long chain (42 of sglang's 4 539 files under 64 kB pass the screen).
A text the screen flags and CPython rejects as a plain syntax error is not handed to libcst either:
its parser backtracks on broken code and a 40 000-link `a.b.c...` with an indentation error kept
it busy for minutes before it overflowed the stack. CPython's message is reported instead.
Where CPython accepts the text, chains libcst parses in super-linear time (trailers: `x[0][0]...`,
4 000 take 38 s) or whose tree its visitors walk recursively (any expression nested past
MAX_DEPTH) are refused too.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, cast

SCREEN_BYTES = 512_000  # files above this are always checked with CPython's parser
SCREEN_LINE = 1_000  # so are files with a line this long
SCREEN_BRACKETS = 50  # or with brackets nested this deep (counted naively, strings included)
SCREEN_OPERATORS = 5_000  # or with this many operator characters / keywords (a chain needs them)
SCREEN_CHAIN = 300  # or this many `elif`s, or `and`/`or`s
SCREEN_INDENT = 100  # or a line indented this far
SCREEN_TRAILERS = 1_500  # or this many `.`, `[` and `(`: a chain libcst parses slowly needs them
MAX_CHAIN = 1_000  # `a and b and ...` / `a < b < ...`: flat for CPython, recursive for libcst
MAX_TRAILERS = 500  # `a.b[0](c)...`: libcst's time grows with the square of the chain
MAX_DEPTH = 1_000  # expressions nested this deep (`1 + 1 + ...` nests to the left): beyond it, refused



def _budget(variable: str, default: int) -> int:
    """A size budget in characters: the environment's `variable` when it holds a whole number."""
    value = os.environ.get(variable, "").strip().replace("_", "")
    return int(value) if value.isdigit() else default


# Cost budgets (issue 27): memory grows with the syntax tree, about 170 bytes of CPython tree and
# 1 000 bytes of libcst tree per source character on a dense literal table (450 on plain code).
# Above ANALYSIS_BUDGET a file that passes the prefilter is not analysed; above LIBCST_BUDGET it
# is not parsed with libcst (`check` shows its findings without a fix, `fix` does not touch it).
# Both are reported as one `too-large` line naming the budget.
ANALYSIS_BUDGET_VARIABLE = "OFFLINT_MAX_ANALYSIS_CHARS"
LIBCST_BUDGET_VARIABLE = "OFFLINT_MAX_FIX_CHARS"
ANALYSIS_BUDGET = 3_000_000
LIBCST_BUDGET = 400_000


def analysis_budget() -> int:
    return _budget(ANALYSIS_BUDGET_VARIABLE, ANALYSIS_BUDGET)


def libcst_budget() -> int:
    return _budget(LIBCST_BUDGET_VARIABLE, LIBCST_BUDGET)


def over_budget(text: str, budget: int, variable: str, what: str) -> Refusal | None:
    """A `too-large` refusal when `text` is longer than `budget` characters."""
    if len(text) <= budget:
        return None
    return Refusal(
        "too-large",
        f"{len(text)} characters, over the {what} budget of {budget} ({variable} raises it)",
    )


def analysis_refusal(text: str) -> Refusal | None:
    return over_budget(text, analysis_budget(), ANALYSIS_BUDGET_VARIABLE, "analysis")


def libcst_refusal(text: str) -> Refusal | None:
    return over_budget(text, libcst_budget(), LIBCST_BUDGET_VARIABLE, "fix (libcst)")


_BRACKETS = re.compile(r"[^()\[\]{}]+")
_DEPTH = str.maketrans({"(": "1", "[": "1", "{": "1", ")": "2", "]": "2", "}": "2"})
_LONG_LINE = re.compile(rf"[^\n]{{{SCREEN_LINE}}}")
_DEEP_INDENT = re.compile(rf"^[ \t]{{{SCREEN_INDENT}}}", re.MULTILINE)
# `.` is left out: attribute chains are everywhere and libcst parses them without recursing deeply
_OPERATORS = (*"+-*/%&|^~<>@", " and ", " or ", "not ", " if ", "lambda", "await ")
DEPTH_MESSAGES = ("too many nested parentheses", "too many levels of indentation", "too many statically nested blocks")


def _bracket_depth(text: str) -> int:
    marks = _BRACKETS.sub("", text).translate(_DEPTH)
    if not marks:
        return 0
    return max(accumulate(1 if m == "1" else -1 for m in marks))


_BOOLEAN_OPERATOR = re.compile(r"\b(?:and|or)\b")


def _count_at_least(pattern: re.Pattern[str], text: str, limit: int) -> bool:
    return any(count > limit for count, _ in enumerate(pattern.finditer(text), start=1))


def _needs_screening(text: str) -> bool:
    return (
        len(text) > SCREEN_BYTES
        or _LONG_LINE.search(text) is not None
        or _DEEP_INDENT.search(text) is not None
        or sum(text.count(op) for op in _OPERATORS) > SCREEN_OPERATORS
        # each `elif` and each `and`/`or` is one more level of recursion for libcst
        or text.count(".") + text.count("[") + text.count("(") > SCREEN_TRAILERS
        or text.count("elif") > SCREEN_CHAIN
        or _count_at_least(_BOOLEAN_OPERATOR, text, SCREEN_CHAIN)
        or _bracket_depth(text) > SCREEN_BRACKETS
    )


def compile_quietly(source: str, filename: str = "<offlint>", flags: int = ast.PyCF_ONLY_AST) -> Any:
    """`compile(source, filename, "exec", flags)` without the warnings CPython gives about the
    code (an invalid escape sequence: SyntaxWarning from 3.12 on, DeprecationWarning before; `is`
    with a literal): they are about the user's file, not offlint's to print on stderr, and under
    `-W error` they would make valid code a syntax error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return compile(source, filename, "exec", flags, dont_inherit=True)


def parse_with_cpython(text: str) -> tuple[ast.Module | None, str | None]:
    """CPython's tree of `text` and None; or None and a one-line reason when the code is nested
    too deeply for any Python; or (None, None) when CPython cannot parse it otherwise (a syntax
    error, or syntax newer than this Python: libcst then has the say)."""
    try:
        tree = compile_quietly(text)
    except (RecursionError, MemoryError):
        return None, "code is nested too deeply for Python to parse"
    except SyntaxError as exc:
        message = str(exc.msg)
        if any(m in message for m in DEPTH_MESSAGES):
            return None, f"code is nested too deeply to parse ({message})"
        return None, None
    except (ValueError, OverflowError):
        return None, None
    return cast(ast.Module, tree), None


@dataclass(frozen=True)
class Refusal:
    """Why a text is not handed to libcst: `syntax` (CPython's own error), `deep` or `too-large`."""

    kind: str
    message: str
    line: int | None = None
    column: int | None = None


def refusal(text: str) -> Refusal | None:
    """Why `text` must not reach libcst's parser, or None when it is safe to parse."""
    too_large = libcst_refusal(text)
    if too_large is not None:
        return too_large
    if not _needs_screening(text):
        return None
    try:
        tree = compile_quietly(text)
    except (RecursionError, MemoryError):
        return Refusal("deep", "code is nested too deeply for Python to parse")
    except SyntaxError as exc:
        message = str(exc.msg)
        if any(m in message for m in DEPTH_MESSAGES):
            return Refusal("deep", f"code is nested too deeply to parse ({message})")
        # large or deep and broken: libcst's error recovery is what is slow or crashes here
        first = message.splitlines()[0] if message else "invalid syntax"
        # CPython's place, as the main path reports it (`engine._cpython_syntax_error`)
        return Refusal("syntax", first, exc.lineno, exc.offset)
    except (ValueError, OverflowError) as exc:
        return Refusal("syntax", str(exc).splitlines()[0] if str(exc) else "invalid source")
    problem = _chain_problem(cast(ast.Module, tree))
    return Refusal("deep", problem) if problem else None


# every level of expression nesting takes one of these (an operator, a bracket, a trailer, a
# keyword): a text with fewer cannot be nested MAX_TRAILERS deep, nor hold a chain that long
_NESTING_CHARS = "+-*/%&|^~<>@([{.:,=!"
_NESTING_WORDS = ("not", "lambda", "if", "await", "and", "or", "yield", "for", "in", "is")


def _could_nest(text: str) -> bool:
    bound = min(MAX_DEPTH, MAX_TRAILERS, MAX_CHAIN)
    total = 0
    for token in (*_NESTING_CHARS, *_NESTING_WORDS):
        total += text.count(token)
        if total >= bound:
            return True
    return False


def depth_problem(text: str, tree: ast.Module) -> str | None:
    """Too deep an expression or too long a chain in CPython's `tree` of `text` (see
    `_chain_problem`): the nesting depth itself, measured wherever the text could reach it, so
    that `check` and `fix` refuse the same files whatever their line lengths (a 5 000-deep sum
    over short lines passed the character screen and cost libcst 11 s)."""
    if not _could_nest(text):
        return None
    # a chain or a depth past the bounds needs that many nesting tokens inside one statement's
    # expressions: only those dense enough are walked (a whole-tree walk cost as much as the parse)
    bound = min(MAX_DEPTH, MAX_TRAILERS, MAX_CHAIN)
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    for root in _expression_roots(tree):
        first, last = root.lineno - 1, root.end_lineno or root.lineno
        if offsets[min(last, len(lines))] - offsets[first] < bound:
            continue  # fewer characters than the tokens it would need
        if _could_nest("".join(lines[first:last])):
            problem = _chain_problem(root)
            if problem is not None:
                return problem
    return None


def _expression_roots(tree: ast.Module) -> Iterator[ast.expr]:
    """The outermost expressions of every statement (statements recursed into, not walked)."""
    statements: list[ast.AST] = [tree]
    while statements:
        node = statements.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                yield child
            elif isinstance(child, ast.stmt | ast.excepthandler | ast.match_case | ast.arguments | ast.keyword | ast.withitem | ast.comprehension):
                statements.append(child)


def _chain_problem(tree: ast.AST) -> str | None:
    """Too long a chain or too deep an expression for libcst, measured on CPython's tree without
    recursing (the tree may be thousands of levels deep)."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.BoolOp) and len(node.values) > MAX_CHAIN:
            return f"a chain of {len(node.values)} boolean operators is too long to parse"
        if isinstance(node, ast.Compare) and len(node.ops) > MAX_CHAIN:
            return f"a chain of {len(node.ops)} comparisons is too long to parse"
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            links, link = 0, cast(ast.expr, node)
            while isinstance(link, (ast.Attribute, ast.Subscript, ast.Call)):
                links += 1
                link = link.func if isinstance(link, ast.Call) else link.value
            if links > MAX_TRAILERS:
                return f"a chain of {links} attributes, subscripts and calls is too long to parse"
        if isinstance(node, ast.expr):
            depth += 1
            if depth > MAX_DEPTH:
                return f"an expression nested {depth} deep is too deep to parse"
        stack.extend((child, depth) for child in ast.iter_child_nodes(node))
    return None


def nesting_problem(text: str) -> str | None:
    """A one-line reason when `text` must not be parsed by libcst (too deep, too long a chain, or
    a large or deep text CPython rejects), else None. `refusal` says which."""
    refused = refusal(text)
    if refused is None:
        return None
    return refused.message if refused.line is None else f"line {refused.line}: {refused.message}"
