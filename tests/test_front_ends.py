"""`check`'s two front ends give identical results.

`FileSettings(front_end="skeleton")` (the default) parses with CPython's `ast` and builds a
libcst-typed skeleton (`analysis/skeleton.py`); `front_end="libcst"` is the reference path, libcst's
own parser. Checked here: every fixture file and every rule example (same diagnostics, errors and
suppression counts); the skeleton's shapes against libcst's parser on small tricky sources; the
fall back to libcst for code CPython cannot parse; and, with the network, a slice of a real tree.

Known differences are strict xfails (they fail today; once one is fixed its test passes, which
strict mode reports as a failure: then drop it from SHAPE_MISMATCHES or OUTCOME_MISMATCHES).
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

import libcst as cst
import pytest

from offlint.analysis.engine import (
    FileSettings,
    check_source,
    decode_source,
    may_hold_hazard,
    parse_with_cpython,
)
from offlint.analysis.skeleton import build_skeleton
from offlint.analysis.syntax import child_nodes
from offlint.catalogue import RuleExample, load_catalogue
from offlint.diagnostics import ErrorKind, FixSafety, Location

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
CATALOGUE = load_catalogue()
SELECT = frozenset(CATALOGUE)  # every rule, including those off by default

Outcome = tuple[list[tuple[str, Location, str, FixSafety]], list[tuple[ErrorKind, str]], int]


@cache
def outcome(
    data: bytes, front_end: str, capture_reachable: tuple[str, ...] = (), *, prefiltered: bool = True
) -> Outcome:
    """What `check` reports for `data`, compared whole. `prefiltered` (the default here) analyses
    every file, also those the prefilter would skip unparsed."""
    settings = FileSettings(select=SELECT, capture_reachable=capture_reachable, front_end=front_end)
    report = check_source(data, "case.py", settings, prefiltered=prefiltered)
    return (
        [(d.code, d.location, d.message, d.fix_safety, d.note) for d in report.diagnostics],
        [(e.kind, e.message) for e in report.errors],
        report.suppressed,
    )


def assert_same_outcome(data: bytes, capture_reachable: tuple[str, ...] = (), **kw: bool) -> Outcome:
    skeleton = outcome(data, "skeleton", capture_reachable, **kw)
    reference = outcome(data, "libcst", capture_reachable, **kw)
    assert skeleton == reference, data.decode("utf-8", "replace")
    return skeleton


# ---------------------------------------------------------------------------- a. fixtures

FIXTURE_FILES = sorted(FIXTURES.rglob("*.py"))


def test_fixture_files_are_found() -> None:
    assert len(FIXTURE_FILES) >= 15
    assert any("golden" in p.relative_to(FIXTURES).parts for p in FIXTURE_FILES)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.relative_to(FIXTURES).as_posix())
@pytest.mark.parametrize("prefiltered", [True, False], ids=["analysed", "as-check"])
def test_fixture_files_agree(path: Path, prefiltered: bool) -> None:
    assert_same_outcome(path.read_bytes(), prefiltered=prefiltered)


def test_fixture_comparison_is_not_vacuous() -> None:
    found = [p for p in FIXTURE_FILES if outcome(p.read_bytes(), "skeleton")[0]]
    assert len(found) >= 5, found
    assert all(not outcome(p.read_bytes(), "skeleton")[1] for p in FIXTURE_FILES)


# ---------------------------------------------------------------------------- b. rule examples

EXAMPLES = [ex for spec in CATALOGUE.values() for ex in (*spec.bad, *spec.good)]


def _reachable(example: RuleExample) -> tuple[str, ...]:
    return tuple(str(p) for p in example.config.get("capture-reachable", []))  # type: ignore[attr-defined]


@pytest.mark.parametrize("example", EXAMPLES, ids=[ex.id for ex in EXAMPLES])
def test_rule_examples_agree(example: RuleExample) -> None:
    found = assert_same_outcome(example.code.encode(), _reachable(example))
    assert not found[1]
    if example.kind == "bad":
        assert any(code == example.rule for code, *_ in found[0])  # not vacuous
    if example.fixed is not None:  # what `fix` makes of a bad example
        assert_same_outcome(example.fixed.encode(), _reachable(example))


# ---------------------------------------------------------------------------- c. shapes

# literals: the skeleton writes the constant's repr (`'a'` for `"a"`, `31` for `0x1F`, `1500.0` for
# `1.5e3`), libcst keeps the source spelling. The analysis reads literals only by type or by
# `evaluated_value` (kinds.py), and the fixers that look at `SimpleString.value` (`"cpu" in ...`)
# are confirmed on a libcst parse before a fix is offered: literals are compared by value here.
_LITERALS = (cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary)
# punctuation that `child_nodes` yields but the skeleton leaves out (`Slice.first_colon`,
# `Slice.second_colon`, `Parameters.posonly_ind`): nothing in the analysis reads them.
_PUNCTUATION = (cst.Colon, cst.ParamSlash)


def _literal(node: cst.CSTNode) -> object:
    value = node.value  # type: ignore[attr-defined]
    if isinstance(node, cst.Float):
        return float(value.replace("_", ""))  # `inf` for 1e999 (repr, not a literal)
    if isinstance(node, cst.Imaginary):
        return complex(value.replace("_", ""))
    return ast.literal_eval(value)


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    children = [c for c in child_nodes(node) if not isinstance(c, _PUNCTUATION)]
    if isinstance(node, cst.MatchCase):
        # the skeleton puts a placeholder for every pattern (patterns hold no calls, and the
        # analysis only walks them): compare the subject, the guard and the body only
        children = [c for c in children if not isinstance(c, cst.MatchPattern)]
    return children


def shape_difference(ours: cst.CSTNode, theirs: cst.CSTNode, where: str = "Module") -> str | None:
    """None when the skeleton node `ours` has libcst's `theirs` shape: the same node types at
    every position, as many `child_nodes`, the same `value` (literals: the same value) and, for
    Arg and Param, the same `star`. Otherwise where and how they first differ."""
    if type(ours) is not type(theirs):
        return f"{where}: skeleton {type(ours).__name__}, libcst {type(theirs).__name__}"
    if isinstance(ours, _LITERALS):
        if _literal(ours) != _literal(theirs):
            return f"{where}: value {ours.value!r} != {theirs.value!r}"  # type: ignore[attr-defined]
    else:
        fields = ("value", "star") if isinstance(ours, cst.Arg | cst.Param) else ("value",)
        for name in fields:
            left, right = getattr(ours, name, None), getattr(theirs, name, None)
            if (isinstance(left, str) or isinstance(right, str)) and left != right:
                return f"{where}: {name} {left!r} != {right!r}"
    mine, reference = _children(ours), _children(theirs)
    if len(mine) != len(reference):
        return (
            f"{where}: skeleton children {[type(c).__name__ for c in mine]}, "
            f"libcst {[type(c).__name__ for c in reference]}"
        )
    for index, (left, right) in enumerate(zip(mine, reference, strict=True)):
        found = shape_difference(left, right, f"{where}/{index}:{type(right).__name__}")
        if found is not None:
            return found
    return None


def skeleton_and_reference(text: str) -> tuple[cst.Module, cst.Module]:
    return build_skeleton(text, ast.parse(text)).module, cst.parse_module(text)


SHAPES: dict[str, str] = {
    # statements and suites
    "elif": "if a:\n    x\nelif b:\n    y\nelif c: z\nelse:\n    w\n",
    "else-if": "if a:\n    x\nelse:\n    if b:\n        y\n    elif c:\n        z\n",
    "else-comment-if": "if a:\n    x\nelse:  # c\n    if b: y\n    else: z\n",
    "elif-after-comments": "if x:\n    pass\n\n\n# c\nelif y: pass\n",
    "one-line-if": "if x: a; b\n",
    "one-line-if-trailing-semicolon": "if x: pass;\n",
    "one-line-def": "def f(): return 1\n",
    "one-line-def-two": "def f(): a; b\n",
    "one-line-class": "class C: pass\n",
    "one-line-class-two": "class C: x = 1; y = 2\n",
    "one-line-else": "if a:\n    x\nelse: x\n",
    "one-line-else-two": "if a: pass\nelse: x; y\n",
    "one-line-try": "try: a\nexcept E: b\nfinally: c\n",
    "one-line-try-else": "try: pass\nexcept: pass\nelse: pass\n",
    "one-line-loops": "while x: pass\nfor a in b: pass\nelse: pass\nwith a: pass\n",
    "semicolons": "a; b\n",
    "semicolon-end": "a;\n",
    "semicolon-after-multiline": "x = (1,\n 2); y = 3\nz = 4\n",
    "docstring": 'def f():\n    """doc"""\n    return 1\n',
    "loops-else": "for a in b:\n    pass\nelse:\n    pass\nwhile a:\n    break\nelse:\n    continue\n",
    "try-full": (
        "try:\n    a\nexcept E as e:\n    b\nexcept (A, B):\n    c\nexcept:\n    d\nelse:\n    e\n"
        "finally:\n    f\n"
    ),
    "del": "del a, b\ndel (a), [b]\ndel (a, b)\ndel x[0], y.z\n",
    "global": "global a, b\nnonlocal c\n",
    "assignments": "a = b = c\nx: int = 1\ny: int\nx += 1\nx @= y\n",
    "raise-assert": "raise A from B\nraise\nassert a, b\n",
    "return-values": "return\nreturn a\nreturn *a, b\n",
    # calls
    "call-args": "f(a, *b, c=1, **d)\n",
    "call-keyword-then-star": "f(x=1, *a)\n",
    "call-interleaved": "f(*a, *b, c, d=1, *e, **f)\nf(a)(b=1, *c)\n",
    "call-multiline": "f(a,\n  *b,\n  c=1)\nf(\n  c=1,\n  *b)\nf(\n  *a,\n  b=1,\n  *c,\n  **d,\n)\n",
    "call-double-star": "f(**a, **b)\nf(**{'a': 1}, b=2)\nprint(*a, sep='')\n",
    "call-chain": "f(a)(b)[c].d\nx = a.b.c(d)\nx = f(a)[b](c)\n",
    "call-parenthesised-args": "f((a), b=(c))\nf(a for a in b)\n",
    "class-bases": "class C(B, metaclass=M, **k): pass\nclass D(B, *a, metaclass=M): pass\n",
    # strings
    "concatenated": 'x = "a" "b"\n',
    "concatenated-three": "x = 'a' \"b\" 'c'\n",
    "concatenated-parenthesised": 'x = ("a"\n     "b")\n',
    "concatenated-comment": 'x = ("a"  # c\n     "b")\n',
    "concatenated-backslash": 'x = "a" \\\n    "b"\n',
    "concatenated-prefixes": "x = b'a' rb'\\d'\ny = r'\\d' 'e'\nz = u'a' 'b'\n",
    "concatenated-triple": "x = '''a\n''' 'b'\n",
    "quote-in-string": "x = 'it''s'\ny = \"'\" '\"'\n",
    "string-escapes": "x = 'a\\n'\ny = '''a\nb'''\n",
    "fstring-call": "x = f\"{f(a, b=1)!r:>{w}}\"\n",
    "fstring-plain": "x = f'a{b}c{d.e(f)}'\ny = f''\nz = f'{x!r}'\n",
    "fstring-spec": "x = f'{x:{y}>10}'\n",
    # definitions
    "decorators": "@d\n@e.f(1)\ndef g(): pass\n@ a . b (c)\nclass C: pass\n@(lambda f: f)\ndef h(): pass\n",
    "async": (
        "async def f():\n    async for a in b:\n        async with c as d, e:\n            await g\n"
        "    return [await y async for y in z if await w]\n"
    ),
    "lambda-defaults": "f = lambda a, b=1, *c, d=2, **e: a\ng = lambda *, a: 0\nh = lambda: (yield)\n",
    "parameters": "def f(a: int = 1, *args: str, b=lambda: 0, c, **kw: dict) -> x: pass\ndef g(*, c=[1]): pass\n",
    # expressions
    "comprehensions": (
        "x = [a for b in c if d if e for f in g if h]\ny = {a: b for a, b in c if a}\n"
        "z = {a for a in b}\nw = (a for a in b for c in a)\n"
    ),
    "walrus": "if (n := f()):\n    pass\nx = [y := 1, z := 2]\n",
    "with-items": "with a as b, c:\n    pass\nwith a as (b, c), d as e.f, g as h[0]:\n    pass\n",
    "with-parenthesised": "with (a as b, c as d):\n    pass\nwith (a, b):\n    pass\nwith (a):\n    pass\n",
    "match": (
        "match x:\n    case 1 if g(y):\n        a\n    case [b, *c] | {'k': d}:\n        f(b)\n"
        "    case C(e=1) as z: pass\n    case _:\n        b\n"
    ),
    "subscripts": "a[1:2, ::3]\na[(1, 2)]\na[1, 2]\na[1,]\na[()]\na[:]\na[::]\na[1:]\na[b][c:d]\n",
    "subscripts-more": "x = a[...]\nx = a[:, None]\nx = a[b][:, 1:2, ...]\n",
    "comparisons": "a < b <= c\nx = a == b == c\nx = a is not b\nx = a not in b\n",
    "unary": "not a\n-a\nx = not not a\nx = - - 1\nx = -1 ** 2\nx = ~a\nx = +a\n",
    "boolean": "a and b and c\na or b and c\nx = a or b or c and d\n",
    "binary": "x = a @ b + c * d // e % f ** g << h >> i | j & k ^ l - m / n\n",
    "ifexp": "x = a if b else c if d else e\n",
    "yield": "def f():\n    yield\n    yield a\n    x = yield from b\n    y = yield a, b\n    z = (yield)\n",
    "await": "async def f():\n    await x\n    y = await z()\n",
    "dict": "x = {**a, 'b': 1}\nx = {**a, **b, 'c': d}\nx = {}\n",
    "displays": "x = [*a, *b]\nx = {*a}\nx = ()\nx = []\nx = [\n  a,\n  b,\n]\nx = (a)\nx = ((a, b))\n",
    "starred-targets": "*a, b = c\n[a, *b] = c\na, = b\nfor x, *y in z: pass\nfor x in *a, b: pass\n",
    "numbers": "x = 1.5e3\nx = 0x1F\nx = 1_000\nx = 2j\nx = 1.5j\nx = 1e999\nx = 0o17\nx = 0b1\n",
    "constants": "x = ...\nx = None\nx = True\nx = False\n",
    # imports
    "imports": (
        "from .. import x\nfrom . import y as z\nimport a.b as c\nimport a, b.c\nimport a.b.c\n"
        "from ...a import b\nfrom .... import b\nfrom . import (a as b, c)\nfrom .a.b import (c, d)\n"
        "from a import *\n"
    ),
    # non-ASCII text before code on a line
    "non-ascii": "x = 'é'; f(é)\né = '日本'; f(é)\nx = '😀'; f('😀', 日=1)\nif é: g(x)\n",
    "non-ascii-suites": "if 'é': f(é); g()\nclass Ü: pass\ndef 日(): return '本'\n",
}
if sys.version_info >= (3, 11):
    SHAPES["try-star"] = "try:\n    a\nexcept* E as e:\n    b\nexcept* (F, G):\n    c\n"
    SHAPES["one-line-try-star"] = "try: a\nexcept* E: b\n"

# the skeleton's shape differs from libcst's today: strict xfails, reported when they were added
SHAPE_MISMATCHES: dict[str, tuple[str, str]] = {
    # implicit concatenation involving an f-string: CPython folds it into one JoinedStr, and the
    # skeleton makes one FormattedString where libcst has a ConcatenatedString
    "fstring-concatenated": ('x = f"a{b}" "c"\n', "f-string concatenation is one FormattedString"),
    "fstring-concatenated-after": ('x = "c" f"a{b}"\n', "f-string concatenation is one FormattedString"),
    "fstring-concatenated-two": ("x = f'{a}' f'{b}'\n", "f-string concatenation is one FormattedString"),
    # `f"{x=}"`: CPython adds a literal "x=" part, libcst keeps one FormattedStringExpression
    "fstring-self-documenting": ('print(f"{x=}")\n', "f'{x=}' gains a FormattedStringText 'x='"),
    # FormattedStringText.value: the skeleton has the decoded text, libcst the source text
    "fstring-escape": ('x = f"a\\n{b}"\n', "FormattedStringText holds decoded text ('\\n', '{')"),
    "fstring-braces": ('x = f"{{a}}"\n', "FormattedStringText holds decoded text ('\\n', '{')"),
    # a starred subscript element (3.11): libcst has Index(star='*', value=b)
    "subscript-starred": ("a[*b]\nx = a[b, *c]\n", "a[*b] is Index(StarredElement(b))"),
    # `a[(1), 2]`: the unparenthesised tuple starts at `(`, so `_parenthesised` takes it for `a[(1, 2)]`
    "subscript-parenthesised-first": ("a[(1), 2]\n", "a[(1), 2] is one SubscriptElement"),
    "subscript-parenthesised-tuple-first": ("a[(1, 2), 3]\n", "a[(1, 2), 3] is one SubscriptElement"),
    # backslash continuation: `_follows_code` and the one-line grouping look at physical lines
    "one-line-suite-backslash": ("if x: \\\n    a\n", "`if x: \\` + newline body is an IndentedBlock"),
    "semicolon-backslash": ("a; \\\nb\n", "`a; \\` + newline `b` are two SimpleStatementLines"),
}


@pytest.mark.parametrize("source", list(SHAPES.values()), ids=list(SHAPES))
def test_skeleton_has_libcst_shapes(source: str) -> None:
    assert shape_difference(*skeleton_and_reference(source)) is None


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(source, marks=pytest.mark.xfail(strict=True, reason=reason), id=name)
        for name, (source, reason) in SHAPE_MISMATCHES.items()
    ],
)
def test_skeleton_shape_mismatches(source: str) -> None:
    assert shape_difference(*skeleton_and_reference(source)) is None


def test_shape_comparison_sees_differences() -> None:
    """The comparison itself: it tells an `elif` from `else:` + `if`, one line from two."""
    ours, _ = skeleton_and_reference("if a:\n    x\nelif b:\n    y\n")
    _, theirs = skeleton_and_reference("if a:\n    x\nelse:\n    if b:\n        y\n")
    assert shape_difference(ours, theirs) is not None
    ours, _ = skeleton_and_reference("a; b\n")
    _, theirs = skeleton_and_reference("a\nb\n")
    assert shape_difference(ours, theirs) is not None
    ours, _ = skeleton_and_reference("f(a, *b)\n")
    _, theirs = skeleton_and_reference("f(a, **b)\n")
    assert shape_difference(ours, theirs) is not None


# whole files: the same outcome on both front ends
_CAPTURED = "import torch\n\n\ndef step(g, x):\n    with torch.cuda.graph(g):\n"
SYNC = "torch.cuda.synchronize()"

NON_ASCII_LINES = [
    f"        x = 'é'; {SYNC}\n",
    f"        é = '日本😀'; {SYNC}\n",
    f"        日本 = x['ü']; {SYNC}  # ü\n",
    f"        print(f'😀{{x}}é', 'ü', 日=1); {SYNC}\n",
    f"        x = ('é',\n             '😀'); {SYNC}\n",
    f"        x = '''é\n😀'''; {SYNC}\n",
]


@pytest.mark.parametrize("line", NON_ASCII_LINES, ids=[str(i) for i in range(len(NON_ASCII_LINES))])
def test_columns_after_non_ascii_text(line: str) -> None:
    """Columns count characters, not UTF-8 bytes (ast's unit), on both front ends."""
    text = _CAPTURED + line
    found = assert_same_outcome(text.encode())
    last = text.splitlines()[-1]
    assert [(code, where.line, where.column) for code, where, *_ in found[0]] == [
        ("OFL105", len(text.splitlines()), last.index(SYNC) + 1)
    ]
    assert found[0][0][1].end_column == last.index(SYNC) + len(SYNC) + 1


AGREEING_FILES = {
    "module-level-return": "import torch\nreturn torch.cuda.synchronize()\n" + _CAPTURED + f"        {SYNC}\n",
    "crlf": (_CAPTURED + f"        x = 'é'; {SYNC}\n").replace("\n", "\r\n"),
    "bom": "\ufeff" + _CAPTURED + f"        {SYNC}\n",
    "no-trailing-newline": _CAPTURED + f"        {SYNC}",
    "tabs": _CAPTURED.replace("    ", "\t") + f"\t\t{SYNC}\n",
    "suppressed": _CAPTURED + f"        {SYNC}  # noqa: OFL105\n        {SYNC}\n",
    "suppressed-own-line": _CAPTURED + f"        # offlint: ignore[OFL105]\n        {SYNC}\n",
    # (neither front end reports a call inside a `case` body today: the finding is after it)
    "match": _CAPTURED + f"        match x:\n            case [a, *b] if b:\n                {SYNC}\n        {SYNC}\n",
    "one-line-suites": _CAPTURED + f"        if x: {SYNC}; {SYNC}\n        else: {SYNC}\n",
    # (a syntax error for CPython before 3.11: the skeleton path falls back to libcst there)
    "try-star": _CAPTURED + f"        try:\n            pass\n        except* E:\n            {SYNC}\n",
    "non-ascii-elif": _CAPTURED + f"        if 'é': pass\n        elif 'ü': {SYNC}\n        else:\n            if x: {SYNC}\n",
}


# once mismatches (reported by the fuzz run and this module), fixed: regression tests
AGREEING_FILES.update(
    {
        # an int literal over 4300 decimal digits (str() of it raises ValueError)
        "huge-hex-literal": "x = 0x" + "f" * 4000 + "\n" + _CAPTURED + f"        {SYNC}\n",
        # old Mac line ends: ast counts '\r' as a line end
        "cr-line-ends": (_CAPTURED + f"        {SYNC}\n").replace("\n", "\r"),
        # a U+2028 above: columns must not shift (str.splitlines breaks there, Python does not)
        "line-separator-columns": "# a\u2028b\nimport torch\nclass B:\n    def f(self):\n"
        "        with torch.cuda.stream(self.stream):\n"
        "            p.data = x.to(d, non_blocking=True)\n",
        # hazards inside `match` cases are found (the model once skipped case bodies)
        "match-case-body": _CAPTURED + f"        match x:\n            case 1:\n                {SYNC}\n",
    }
)


@pytest.mark.parametrize("text", list(AGREEING_FILES.values()), ids=list(AGREEING_FILES))
def test_files_agree(text: str) -> None:
    found = assert_same_outcome(text.encode("utf-8"))
    assert found[0] or found[2]  # analysed, not vacuous


# the outcome differs today: strict xfails, reported when they were added
OUTCOME_MISMATCHES: dict[str, tuple[str, str]] = {
    # CPython accepts a starred base after a keyword in a class definition, libcst refuses it:
    # the skeleton path analyses the file, the reference reports a syntax error
    "class-keyword-then-star": (
        "class C(x=1, *a): pass\n" + _CAPTURED + f"        {SYNC}\n",
        "CPython parses `class C(x=1, *a)`, libcst does not",
    ),
    # a form feed before the indentation: CPython accepts it, libcst reports a syntax error
    "form-feed-indent": (
        _CAPTURED + f"\x0c        {SYNC}\n",
        "form feed before the indentation: skeleton analyses, libcst reports a syntax error",
    ),
    # spaces, a tab, spaces: CPython's tab stops accept the indentation, libcst refuses it
    # (found by benchmarks/fuzz.py, input 4364 of seed 0)
    "tab-after-spaces-indent": (
        f"import torch\n\n\ndef step(g, x):\n    if x:\n        with torch.cuda.graph(g):\n       \t     {SYNC}\n",
        "7 spaces + tab + 5 spaces under an 8-space block: skeleton analyses, libcst reports a syntax error",
    ),
}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(text, marks=pytest.mark.xfail(strict=True, reason=reason), id=name)
        for name, (text, reason) in OUTCOME_MISMATCHES.items()
    ],
)
def test_outcome_mismatches(text: str) -> None:
    assert_same_outcome(text.encode("utf-8"))


# ---------------------------------------------------------------------------- d. fall back, errors

# syntax newer than this Python (libcst parses it), or code CPython refuses that libcst takes
NEWER_SYNTAX = {
    "type-alias": "type X = int\n",
    "generic-def": "def f[T](x: T) -> T:\n    return x\n",
    "generic-class": "class Box[T]:\n    pass\n",
    "nested-quotes-fstring": 'x = f"{y["a"]}"\n',
}


@pytest.mark.parametrize("text", list(NEWER_SYNTAX.values()), ids=list(NEWER_SYNTAX))
def test_skeleton_falls_back_to_libcst(text: str) -> None:
    text = text + _CAPTURED + f"        {SYNC}\n"
    tree, problem = parse_with_cpython(text)
    if tree is not None:
        pytest.skip(f"Python {sys.version_info[:2]} parses this: nothing to fall back from")
    assert problem is None
    cst.parse_module(text)  # libcst takes it
    found = assert_same_outcome(text.encode())
    assert not found[1] and [code for code, *_ in found[0]] == ["OFL105"]


SYNTAX_ERRORS = {
    "unclosed-def": "def f(:\n",
    "unclosed-paren": "x = (\n",
    "unexpected-indent": "  x = 1\n",
    "assign-to-call": "f() = 1\n",
    "star-after-double-star": "f(**a, *b)\n",
    "dedent-mismatch": "if a:\n        x\n    y\n",
    "bad-token": "x = 1 $ 2\n",
    "unterminated-string": "x = 'abc\n",
}


@pytest.mark.parametrize("text", list(SYNTAX_ERRORS.values()), ids=list(SYNTAX_ERRORS))
def test_syntax_errors_agree(text: str) -> None:
    for where in ("before", "after"):
        source = text + _CAPTURED + f"        {SYNC}\n" if where == "before" else _CAPTURED + f"        {SYNC}\n" + text
        found = assert_same_outcome(source.encode())
        assert [kind for kind, _ in found[1]] == [ErrorKind.SYNTAX]
        assert found[0] == []


TOO_DEEP = {
    "parentheses": "x = " + "(" * 250 + "1" + ")" * 250 + "\n",
    "unary": "x = " + "-" * 3000 + "1\n",
    "binary": "x = " + " + ".join(["a"] * 5000) + "\n",
    "boolean": "x = " + " and ".join(["a"] * 5000) + "\n",
    "comparison": "x = " + " < ".join(["a"] * 5000) + "\n",
    "blocks": "".join("    " * i + "if a:\n" for i in range(120)) + "    " * 120 + "pass\n",
    "attributes": "x = a" + ".b" * 5000 + "\n",
    "calls": "x = a" + "()" * 5000 + "\n",
}


@pytest.mark.parametrize("text", list(TOO_DEEP.values()), ids=list(TOO_DEEP))
def test_too_deep_agrees(text: str) -> None:
    found = assert_same_outcome((_CAPTURED + f"        {SYNC}\n" + text).encode())
    assert [kind for kind, _ in found[1]] == [ErrorKind.TOO_DEEP]


def test_undecodable_agrees() -> None:
    found = assert_same_outcome(b"import torch\nx = '\xff'\n" + _CAPTURED.encode() + SYNC.encode())
    assert [kind for kind, _ in found[1]] == [ErrorKind.UNDECODABLE]


# ---------------------------------------------------------------------------- e. a real tree


@pytest.mark.network
@pytest.mark.slow
def test_front_ends_agree_on_sglang() -> None:
    from tests.test_real_trees import _tree

    srt = _tree("sglang") / "sglang" / "srt"
    assert srt.is_dir(), srt
    prefilter = FileSettings(select=SELECT)
    files: list[Path] = []
    for path in sorted(srt.rglob("*.py")):
        try:
            text = decode_source(path.read_bytes())
        except Exception:
            continue
        if may_hold_hazard(text, prefilter):
            files.append(path)
            if len(files) == 150:
                break
    assert len(files) == 150
    differ = []
    findings = 0
    for path in files:
        data = path.read_bytes()
        # not cached: the tree's outcomes are not worth keeping
        skeleton, reference = outcome.__wrapped__(data, "skeleton"), outcome.__wrapped__(data, "libcst")
        if skeleton != reference:
            differ.append((path.relative_to(srt).as_posix(), skeleton, reference))
        findings += len(skeleton[0])
    assert differ == []
    assert findings > 0
