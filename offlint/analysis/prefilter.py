"""Decide without parsing whether a file can hold a finding of the selected rules.

Parsing with libcst is the whole cost of a run, so every file goes through two cheap stages
first. Both are *necessary conditions*: a file they reject cannot produce a finding, given how
`model.py` and the rules work. When in doubt they let the file through.

1. Rule tokens. Each rule declares `tokens`, text it needs (any one). We match the identifier
   core of each token (`".item("` -> `item`, `".data ="` -> `data`) as a plain substring, so
   spacing, line breaks and `from torch import nonzero as nz` cannot hide a call. A rule with no
   usable token always passes this stage.
2. Capture gate, for the rules that only report in capture-reachable code or in a graph-capture
   region (`CAPTURE_GATED_RULES`). It accepts a file only when it holds one of the ways
   `model.py` makes code capture-reachable (`torch_api.CAPTURE_TOKENS`):
   - a torch stream/event/graph API (`torch.cuda.Stream`, `torch.cuda.stream`,
     `is_current_stream_capturing`, `torch.cuda.graph`, ...), found by its last name, either
     imported by that name or reached through a dotted chain whose head an import binds
     (`self.stream` and `req.stream` are not torch APIs; `torch.cuda.stream` and `tc.stream` are),
     or - where the text can bind a torch device module (`torch.get_device_module(...)`,
     `getattr(torch, ...)`, `torch.cuda` as a value) - through any chain (`self.device_module.Stream`);
   - a call of a capture test another module defines (`get_is_capture_mode()`,
     `is_graph_capturing()`: `torch_api.CAPTURE_PREDICATE_NAME`);
   - a method name (`wait_stream`, `record_stream`, `capture_begin`, hook registrars, ...);
   - an assignment to `x.forward`;
   - a function named by `capture-reachable` configuration (all its literal fragments).

Everything here is plain `str` searching and a few regular expressions: no libcst, no `ast`
(`ast.parse` costs a fifth of a libcst parse, far too much for a filter). The rule tokens are
read from the rule modules' source (`tokens = (...)` literals) so that this module never imports
libcst; a rule whose tokens are not a literal makes us import the rules instead.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from offlint.analysis import torch_api
from offlint.analysis.torch_api import (
    ACCELERATOR_METHODS,
    CAPTURE_API_NAMES,
    CAPTURE_ASSIGNED_ATTRS,
    CAPTURE_METHOD_NAMES,
    CAPTURE_PREDICATE_NAME,
)

# Rules that can only fire in capture-reachable code or a graph-capture region, with names that
# let them fire without it (OFL106 also flags `non_blocking=True` copies anywhere). A rule that is
# not listed is never gated: sound, only slower. OFL204/OFL205 need `with torch.cuda.stream(...)`
# (the model's stream scopes), itself a capture-gate source. OFL301 (torch.compile) is not gated.
CAPTURE_GATED_RULES: dict[str, tuple[str, ...]] = {
    "OFL101": (),
    "OFL102": (),
    "OFL103": (),
    "OFL104": (),
    "OFL105": (),
    "OFL106": ("non_blocking",),
    "OFL107": (),
    "OFL108": (),
    "OFL201": (),
    "OFL202": (),
    "OFL203": (),
    "OFL204": (),
    "OFL205": (),
}

# Rules that also need every one of these words (their roots are in the same module): OFL301
# reports only code that `torch.compile` (a call or a decorator) reaches.
CO_REQUIRED: dict[str, tuple[str, ...]] = {"OFL301": ("compile",)}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE = " \t\f\r\n\\"
# the text after `import` up to the end of the statement: a parenthesised list, or the rest of
# the logical line (backslash continuations included)
_IMPORT_TAIL = re.compile(r"[ \t\f]*(\([^)]*\)|(?:[^\n\\;#]|\\.)*)", re.DOTALL)
_FORWARD_STORE = re.compile(
    r"\.[ \t\f\r\n\\]*(?:"
    + "|".join(sorted(CAPTURE_ASSIGNED_ATTRS))
    + r")\b[ \t\f\r\n\\)]*(?:=(?!=)|:|[-+*/%&|^@]=|//=|\*\*=|<<=|>>=|#)"
)
_UNSURE = "<unsure>"
# every CAPTURE_METHOD_NAMES entry contains one of these: a quick first test
_METHOD_PREFIXES = tuple(
    sorted({next((p for p in ("wait_", "record_", "capture_") if p in n), n) for n in CAPTURE_METHOD_NAMES})
)


@cache
def _attribute_of(name: str) -> re.Pattern[str]:
    """`.name` as an attribute (compiled when first needed: a warm run needs none)."""
    return re.compile(r"\.[ \t\f\r\n\\]*" + name + r"\b")


def token_core(token: str) -> str | None:
    """The identifier a token needs: the last name before any `(` or `=` (`".to("` -> `to`)."""
    head = re.split(r"[(=]", token.strip(), maxsplit=1)[0]
    names = _IDENT.findall(head)
    return names[-1] if names else None


@dataclass(frozen=True)
class RuleFilter:
    code: str
    cores: tuple[str, ...]  # any one must be in the text; () = always
    gated: bool
    alternatives: tuple[str, ...] = ()  # names that open the gate for this rule alone
    required: tuple[str, ...] = ()  # words the text must also hold (CO_REQUIRED)


@dataclass(frozen=True)
class Plan:
    """The prefilter for one selection and configuration.

    Evaluated as: an ungated rule's token; or the capture gate and a token of any gated rule;
    or a gated rule's own alternative and token. Tokens are searched shortest first, as the
    short ones (`to`, `cpu`) are the common ones and a hit ends the search early.
    """

    rules: tuple[RuleFilter, ...]
    reachable_patterns: tuple[str, ...] = ()
    _fragments: tuple[tuple[str, ...] | None, ...] = field(default=(), repr=False)

    def accepts(self, text: str) -> bool:
        for rule in self.rules:
            if not rule.gated and _any_in(rule.cores, text) and all(w in text for w in rule.required):
                return True
        gated = [r for r in self.rules if r.gated]
        if not gated:
            return False
        for rule in gated:
            if rule.alternatives and _any_in(rule.alternatives, text) and _any_in(rule.cores, text):
                return True
        if not self.capture_gate(text):
            return False
        if any(not r.cores for r in gated):
            return True
        union = sorted({c for r in gated for c in r.cores}, key=len)
        return any(core in text for core in union)

    def capture_gate(self, text: str) -> bool:
        if any(prefix in text for prefix in _METHOD_PREFIXES) and any(
            name in text for name in CAPTURE_METHOD_NAMES
        ):
            return True
        if CAPTURE_ASSIGNED_ATTRS and any(attr in text for attr in CAPTURE_ASSIGNED_ATTRS) and _FORWARD_STORE.search(text):
            return True
        for fragments in self._fragments:
            if fragments is None or all(f in text for f in fragments):
                return True
        if "captur" in text and _CAPTURE_PREDICATE_CALL.search(text):
            return True  # a capture test imported from another module (`get_is_capture_mode()`)
        return "torch" in text and mentions_torch_api(text)


def _any_in(cores: tuple[str, ...], text: str) -> bool:
    return not cores or any(core in text for core in cores)


def mentions_torch_api(text: str) -> bool:
    """A capture API name used where it can resolve to torch: imported by name, or the last
    link of a dotted chain whose head some import binds - or any head, where the text can bind
    a name to a torch device module (`device_module = torch.get_device_module(dev)`,
    `self.mod = getattr(torch, kind)`, `mod = torch.cuda`: `imports.NameResolver`)."""
    imported: frozenset[str] | None = None
    device_module: bool | None = None
    for name in CAPTURE_API_NAMES:
        if name not in text:
            continue
        if imported is None:
            imported = imported_names(text)
        if name in imported:
            return True
        for match in _attribute_of(name).finditer(text):
            head = chain_head(text, match.start())
            if head is _UNSURE or (head is not None and head in imported):
                return True
            if head is not None and name in ACCELERATOR_METHODS:
                return True  # on an object of the project's own: model.py types it by this use
            if head is not None:
                if device_module is None:
                    device_module = _DEVICE_MODULE_VALUE.search(text) is not None
                if device_module:
                    return True
    return False


# a call of a capture test another module of the project defines (`torch_api.CAPTURE_PREDICATE_NAME`)
_CAPTURE_PREDICATE_CALL = re.compile(r"\b(?:" + CAPTURE_PREDICATE_NAME + r")\s*\(")
# a torch device module used as a value (a superset of what `NameResolver.device_module_of`
# accepts): `torch.get_device_module(...)`, `getattr(torch, ...)`, `torch.cuda` not followed by `.`
_DEVICE_MODULE_VALUE = re.compile(r"get_device_module|getattr\(\s*torch\b|\btorch[ \t]*\.[ \t]*cuda\b(?![ \t]*[.\\])")


def imported_names(text: str) -> frozenset[str]:
    """Every identifier after an `import` keyword, to the end of its statement: a superset of
    the names imports bind (`import a.b as c`, `from m import (x as y, z)`)."""
    found: set[str] = set()
    at = text.find("import")
    while at >= 0:
        end = at + 6
        if (at == 0 or text[at - 1] not in _IDENT_CHARS) and (end >= len(text) or text[end] not in _IDENT_CHARS):
            match = _IMPORT_TAIL.match(text, end)
            if match:
                found.update(_IDENT.findall(match.group(1)))
        at = text.find("import", end)
    return frozenset(found)


def chain_head(text: str, dot: int) -> str | None:
    """For `a.b.c` with `text[dot]` the dot before `c`: `a`. None when the chain does not start
    at a name (`f().c`, `x[0].c`), `_UNSURE` when it cannot be told cheaply (parentheses,
    a chain broken across lines, where comments may hide)."""
    i = dot
    while True:
        j = i - 1
        crossed_line = False
        while j >= 0 and text[j] in _SPACE:
            crossed_line = crossed_line or text[j] == "\n"
            j -= 1
        if j < 0:
            return _UNSURE
        if crossed_line:
            return _UNSURE
        ch = text[j]
        if ch == ")":
            return _UNSURE  # `(torch.cuda).Stream` resolves in libcst
        if ch not in _IDENT_CHARS:
            return None  # a subscript, a literal, a call result: never a dotted name
        k = j
        while k > 0 and text[k - 1] in _IDENT_CHARS:
            k -= 1
        name = text[k : j + 1]
        m = k - 1
        crossed_line = False
        while m >= 0 and text[m] in _SPACE:
            crossed_line = crossed_line or text[m] == "\n"
            m -= 1
        if m >= 0 and text[m] == ".":
            if crossed_line:
                return _UNSURE
            i = m
            continue
        return name


# --------------------------------------------------------------------------- plans


@cache
def rule_tokens() -> dict[str, tuple[str, ...]]:
    """{code: tokens} of every rule, read from the rule modules without importing them."""
    static = _static_rule_tokens()
    if static is not None:
        return static
    from offlint.analysis.rules import all_rules

    return {code: tuple(cls.tokens) for code, cls in all_rules().items()}


def _static_rule_tokens() -> dict[str, tuple[str, ...]] | None:
    folder = Path(__file__).resolve().parent / "rules"
    found: dict[str, tuple[str, ...]] = {}
    try:
        paths = sorted(folder.glob("ofl*.py"))
        for path in paths:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if not isinstance(node, ast.ClassDef):
                    continue
                values: dict[str, object] = {}
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                        target = stmt.targets[0]
                        if isinstance(target, ast.Name) and target.id in ("code", "tokens"):
                            values[target.id] = _constant_value(stmt.value)
                if "code" not in values:
                    continue
                bases = [b.id if isinstance(b, ast.Name) else None for b in node.bases]
                if bases != ["Rule"]:
                    return None  # inherited tokens: ask the classes
                tokens = values.get("tokens", ())
                if not isinstance(tokens, tuple) or not all(isinstance(t, str) for t in tokens):
                    return None
                found[str(values["code"])] = tokens
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    return found or None


def _constant_value(node: ast.expr) -> object:
    """A literal, or a name of `torch_api` (`tokens = CAPTURE_TOKENS`)."""
    if isinstance(node, ast.Name) and node.id.isupper() and hasattr(torch_api, node.id):
        return getattr(torch_api, node.id)
    return ast.literal_eval(node)


def _pattern_fragments(pattern: str) -> tuple[str, ...] | None:
    """Literal parts every name matching an fnmatch pattern over `Class.method` contains;
    None when nothing can be said (character classes)."""
    if "[" in pattern:
        return None
    parts = [p for p in re.split(r"[*?.]", pattern) if p and p not in "<locals>"]
    return tuple(parts) if parts else None


@cache
def plan_for(select: frozenset[str], capture_reachable: tuple[str, ...] = ()) -> Plan:
    tokens = rule_tokens()
    rules: list[RuleFilter] = []
    for code in sorted(select):
        if code not in tokens:
            continue
        cores = tuple(dict.fromkeys(token_core(t) for t in tokens[code]))
        usable = () if None in cores else tuple(c for c in cores if c)
        rules.append(
            RuleFilter(
                code=code,
                cores=usable,
                gated=code in CAPTURE_GATED_RULES,
                alternatives=CAPTURE_GATED_RULES.get(code, ()),
                required=CO_REQUIRED.get(code, ()),
            )
        )
    fragments = tuple(_pattern_fragments(p) for p in capture_reachable)
    return Plan(tuple(rules), tuple(capture_reachable), fragments)


def accepts(text: str, select: Iterable[str], capture_reachable: tuple[str, ...] = ()) -> bool:
    return plan_for(frozenset(select), tuple(capture_reachable)).accepts(text)


# A row of a literal table: numbers, simple strings, True/False/None, brackets, `:` and `,` only,
# ending in a comma. A letter can only follow a digit (`0x1f`, `1e5`, `2j`), so no name, keyword
# or call fits; a line opening a triple-quoted string leaves a quote unmatched.
_LITERAL_ROW = re.compile(
    r"""[ \t]*(?:'[^'\\\r\n]*'|"[^"\\\r\n]*"|\b(?:True|False|None)\b|[0-9][0-9a-zA-Z_.]*|[-+()\[\]{}:,. \t])*,[ \t]*\r?"""
)
_QUOTED = re.compile(r"""'[^'\\\r\n]*'|"[^"\\\r\n]*\"""")
LITERAL_RUN = 64  # consecutive rows: a table, not an argument list


ROW_DEPTH = 20  # deeper rows are left to the parsers (and the depth guard)
# A literal this long on one line (`X = [0.1, 0.2, ...]`) is summarised too: the elements
# between its brackets become one string of the same length (`X = ['          ']`: every column
# kept; a string costs libcst a byte per character, spaces between brackets 180)
LONG_LITERAL = 2_000
# one way only to split a run of elements (a number is maximal): no backtracking blow-up on a
# long line that turns out not to be a literal
_ELEMENTS = r"""(?:'[^'\\\r\n]*'|"[^"\\\r\n]*"|\b(?:True|False|None)\b|[0-9][0-9a-zA-Z_.]*(?![0-9a-zA-Z_.])|[-+()\[\]{}:,. \t])"""
_ELEMENT = re.compile(_ELEMENTS)
_LONG_LINE = re.compile(rf"[^\n]{{{LONG_LITERAL}}}")
_PAIRS = {"[": "]", "(": ")", "{": "}"}


def _balanced(row: str) -> bool:
    depth = 0
    for char in _QUOTED.sub("", row):
        if char in "([{":
            depth += 1
            if depth > ROW_DEPTH:
                return False
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _comma_run(lines: list[str]) -> bool:
    """LITERAL_RUN consecutive lines ending in a comma somewhere (a table's rows all do)."""
    run = 0
    for line in lines:
        run = run + 1 if line.rstrip().endswith(",") else 0
        if run >= LITERAL_RUN:
            return True
    return False


def literal_table_runs(text: str) -> list[tuple[int, int]]:
    """The 0-based [first, end) line ranges (lines split at `\\n`) of the long literal tables in
    `text`: LITERAL_RUN or more consecutive lines that are each whole, comma-ended literal elements."""
    runs = _long_literal_lines(text) if _LONG_LINE.search(text) else []
    if text.count("\n") < LITERAL_RUN:
        return runs
    lines = text.split("\n")
    if not _comma_run(lines):
        return runs  # most files: the row-by-row match below costs as much as CPython's parse
    start = None
    for index in range(len(lines) + 1):
        row = index < len(lines) and _LITERAL_ROW.fullmatch(lines[index]) is not None and _balanced(lines[index])
        if row:
            if start is None:
                start = index
            continue
        if start is not None and index - start >= LITERAL_RUN:
            runs.append((start, index))
        start = None
    return sorted(runs)


def _inline_spans(line: str) -> list[tuple[int, int]]:
    """The [start, end) columns of `line`'s long literals: LONG_LITERAL or more characters of
    literal elements right inside a matching bracket pair (not a subscript's), outermost only.
    One pass: a stack of open brackets, and how many of them (the bottom ones) enclose
    something that is not a literal element."""
    spans: list[tuple[int, int]] = []
    stack: list[int] = []  # positions of the open brackets
    dirty = 0  # stack[:dirty] enclose a non-literal character
    at, size = 0, len(line)
    while at < size:
        char = line[at]
        if char in "([{":
            stack.append(at)
            if len(stack) > ROW_DEPTH:
                dirty = len(stack)  # deeper nesting is the parsers' to judge (and the depth guard's)
            at += 1
            continue
        if char in ")]}":
            if stack and _PAIRS[line[stack[-1]]] == char:
                clean = len(stack) - 1 >= dirty
                opening = stack.pop()
                dirty = min(dirty, len(stack))
                if clean and at - opening - 1 >= LONG_LITERAL and not _subscript(line, opening):
                    while spans and spans[-1][0] > opening:
                        spans.pop()  # an inner literal of this one
                    spans.append((opening + 1, at))
            else:
                stack.clear()
                dirty = 0
            at += 1
            continue
        match = _ELEMENT.match(line, at)
        if match is not None and match.end() > at:
            at = match.end()
            continue
        dirty = len(stack)  # a name, an operator, an unclosed string: no open bracket is a literal
        at += 1
    return spans


def _placeholder(width: int) -> str:
    """One string literal `width` characters long (at least 2)."""
    return "'" + " " * (width - 2) + "'"


def _subscript(line: str, bracket: int) -> bool:
    """Whether the `[` at `bracket` subscripts something (`x[...]`: empty, a syntax error)."""
    if line[bracket] != "[":
        return False
    before = line[:bracket].rstrip(" \t")
    return bool(before) and (before[-1] in _IDENT_CHARS or before[-1] in ")]}'\"")


def _long_literal_lines(text: str) -> list[tuple[int, int]]:
    """(index, index + 1) of each line holding a long literal (`_inline_spans`): one-line runs,
    told from tables' by their length (a table's run is at least LITERAL_RUN lines)."""
    found = []
    for index, line in enumerate(text.split("\n")):
        if len(line) >= LONG_LITERAL and _inline_spans(line):
            found.append((index, index + 1))
    return found


def blank_literal_tables(text: str, runs: list[tuple[int, int]] | None = None) -> str:
    """`text` with the rows of long literal tables (`literal_table_runs`, or `runs`) emptied, line
    ends kept: every other line keeps its number and columns. A table holds no stream code, and
    CPython's tree of a 1 MB table costs 170 MB, libcst's over 1 GB: every parser is handed this
    text instead (the caller parses the original when it does not compile: a run of bare `1,`
    statements that formed a block's whole body). The one size budget of every parse path."""
    if runs is None:
        runs = literal_table_runs(text)
    if not runs:
        return text
    lines = text.split("\n")
    for start, end in runs:
        if end - start == 1:  # a long literal on one line: its elements become spaces
            line = lines[start]
            for low, high in _inline_spans(line):
                line = line[:low] + _placeholder(high - low) + line[high:]
            lines[start] = line
            continue
        for blank in range(start, end):
            lines[blank] = "\r" if lines[blank].endswith("\r") else ""
    return "\n".join(lines)


def without_literals(text: str, runs: list[tuple[int, int]] | None = None) -> str:
    """`blank_literal_tables(text)` where it still compiles, else `text`: what a parser is handed
    (a run of bare `1,` statements may have been a block's whole body)."""
    from offlint.analysis.guard import compile_quietly

    light = blank_literal_tables(text, runs)
    if light is text:
        return text
    try:
        compile_quietly(light)
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
        return text
    return light


def blank_literal_rows(data: bytes, runs: list[tuple[int, int]]) -> bytes:
    """`blank_literal_tables` on the file's bytes (its encoding, BOM and line ends kept): the
    lines of `runs` (counted in the decoded text, split at `\\n` as the bytes are) emptied."""
    if not runs:
        return data
    lines = data.split(b"\n")
    for start, end in runs:
        if end - start == 1:
            line = lines[start]
            for low, high in _inline_spans(line.decode("latin-1")):  # a character per byte
                line = line[:low] + _placeholder(high - low).encode() + line[high:]
            lines[start] = line
            continue
        for blank in range(start, end):
            lines[blank] = b"\r" if lines[blank].endswith(b"\r") else b""
    return b"\n".join(lines)
