"""libcst-typed skeleton trees built from CPython's parser: the cheap front end of `check`.

The model and the rules are written against libcst's node types. Parsing with libcst costs 6-8x
CPython's `ast.parse`, almost all of it in building the whitespace, comma and parenthesis nodes
that a lossless tree needs and that the analysis never reads. So `check` parses with `ast` and
builds the same libcst node types with only their code-bearing fields (`syntax.child_nodes`'s
fields, plus `Arg.star` and `Param.star`), without running libcst's constructors or validation.

A skeleton is for reading only: it cannot be printed (`code_for_node`), compared with
`deep_equals` or rewritten. Source text and positions come from the ast node each skeleton node
was made from (`Skeleton.origin`). `fix`, and the fix-availability check on files with fixable
findings, parse with libcst itself; tests check that both front ends give the same diagnostics.

Shapes follow libcst's parser: `a; b` is one `SimpleStatementLine`, a one-line body is a
`SimpleStatementSuite`, `elif` is an `If` in `orelse`, `a and b and c` nests to the left,
call arguments keep their source order, implicit string concatenation is a
`ConcatenatedString`.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import libcst as cst

from offlint.analysis.guard import MAX_CHAIN
from offlint.analysis.syntax import _code_fields


class SkeletonGap(Exception):
    """The skeleton cannot answer (a reported node with no source position): analyse the file
    with libcst instead."""


class TooLongChain(Exception):
    """A boolean or comparison chain longer than `guard.MAX_CHAIN`: refused on both paths alike
    (libcst recurses once per link)."""


# ---------------------------------------------------------------------------- node making

# fields read by the analysis that `child_nodes` skips as punctuation
_EXTRA_FIELDS: dict[type, tuple[str, ...]] = {cst.Arg: ("star",), cst.Param: ("star",)}
_FACTORIES: dict[type, Callable[..., Any]] = {}


def _factory(node_type: type) -> Callable[..., Any]:
    """A function making a `node_type` from keyword values (defaults for the other code fields),
    without libcst's constructor. Generated once per type: building is most of a skeleton's cost,
    and a straight-line function is several times faster than a loop over the fields."""
    by_name = {f.name: f for f in dataclasses.fields(node_type)}
    names = [n for n in (*_code_fields(node_type), *_EXTRA_FIELDS.get(node_type, ())) if n in by_name]
    namespace: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__, "_type": node_type}
    parameters = []
    for index, name in enumerate(names):
        default = by_name[name].default
        namespace[f"_d{index}"] = None if default is dataclasses.MISSING else default
        parameters.append(f"{name}=_d{index}")
    body = "".join(f"    _set(node, {name!r}, {name})\n" for name in names)
    source = f"def make({', '.join(parameters)}):\n    node = _new(_type)\n{body}    return node\n"
    exec(compile(source, f"<skeleton factory {node_type.__name__}>", "exec"), namespace)
    return cast(Callable[..., Any], namespace["make"])


def _make(node_type: type, **values: Any) -> Any:
    """A node of `node_type` with `values` and defaults for its other code fields, built without
    libcst's constructor (no validation, no whitespace nodes)."""
    make = _FACTORIES.get(node_type)
    if make is None:
        make = _FACTORIES[node_type] = _factory(node_type)
    return make(**values)


_SINGLETONS: dict[type, Any] = {}


def _token(node_type: type) -> Any:
    """Operators and keywords (`cst.Add()`, `cst.Not()`): one shared instance per type."""
    found = _SINGLETONS.get(node_type)
    if found is None:
        found = _SINGLETONS[node_type] = _make(node_type)
    return found


_BINARY = {
    ast.Add: cst.Add, ast.Sub: cst.Subtract, ast.Mult: cst.Multiply, ast.Div: cst.Divide,
    ast.FloorDiv: cst.FloorDivide, ast.Mod: cst.Modulo, ast.Pow: cst.Power,
    ast.LShift: cst.LeftShift, ast.RShift: cst.RightShift, ast.BitOr: cst.BitOr,
    ast.BitAnd: cst.BitAnd, ast.BitXor: cst.BitXor, ast.MatMult: cst.MatrixMultiply,
}  # fmt: skip
_AUGMENTED = {
    ast.Add: cst.AddAssign, ast.Sub: cst.SubtractAssign, ast.Mult: cst.MultiplyAssign,
    ast.Div: cst.DivideAssign, ast.FloorDiv: cst.FloorDivideAssign, ast.Mod: cst.ModuloAssign,
    ast.Pow: cst.PowerAssign, ast.LShift: cst.LeftShiftAssign, ast.RShift: cst.RightShiftAssign,
    ast.BitOr: cst.BitOrAssign, ast.BitAnd: cst.BitAndAssign, ast.BitXor: cst.BitXorAssign,
    ast.MatMult: cst.MatrixMultiplyAssign,
}  # fmt: skip
_UNARY = {ast.Not: cst.Not, ast.USub: cst.Minus, ast.UAdd: cst.Plus, ast.Invert: cst.BitInvert}
_COMPARE = {
    ast.Eq: cst.Equal, ast.NotEq: cst.NotEqual, ast.Lt: cst.LessThan, ast.LtE: cst.LessThanEqual,
    ast.Gt: cst.GreaterThan, ast.GtE: cst.GreaterThanEqual, ast.Is: cst.Is, ast.IsNot: cst.IsNot,
    ast.In: cst.In, ast.NotIn: cst.NotIn,
}  # fmt: skip
_BOOLEAN = {ast.And: cst.And, ast.Or: cst.Or}
_SMALL_STATEMENTS = (
    ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Raise, ast.Assert,
    ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Pass, ast.Break, ast.Continue,
    ast.Delete,
)  # fmt: skip


# ---------------------------------------------------------------------------- the tree


@dataclass
class Skeleton:
    module: cst.Module
    tree: ast.Module
    text: str
    # id(skeleton node) -> the ast node it was made from (or a stand-in with positions)
    origin: dict[int, Any]
    imports: list[Any]  # the Import/ImportFrom statements, in source order
    lines: list[str]  # `source_lines(text)`
    _line_starts: list[int] | None = None

    def span(self, node: cst.CSTNode) -> tuple[int, int, int, int] | None:
        """(line, column, end line, end column) of `node`: 1-based lines, 0-based columns in
        characters (ast counts UTF-8 bytes), parentheses excluded, as libcst's PositionProvider."""
        origin = self.origin.get(id(node))
        if origin is None or getattr(origin, "end_lineno", None) is None:
            return None
        return (
            origin.lineno,
            self._column(origin.lineno, origin.col_offset),
            origin.end_lineno,
            self._column(origin.end_lineno, origin.end_col_offset),
        )

    def source_of(self, node: cst.CSTNode) -> str | None:
        where = self.span(node)
        if where is None:
            return None
        starts = self._starts()
        return self.text[starts[where[0] - 1] + where[1] : starts[where[2] - 1] + where[3]]

    def _column(self, line: int, byte_column: int) -> int:
        text = self.lines[line - 1] if line <= len(self.lines) else ""
        if text.isascii():
            return byte_column
        return len(text.encode("utf-8")[:byte_column].decode("utf-8", errors="replace"))

    def _starts(self) -> list[int]:
        if self._line_starts is None:
            self._line_starts = [0, *(m.end() for m in _LINE_BREAK.finditer(self.text))]
        return self._line_starts


def build_skeleton(text: str, tree: ast.Module) -> Skeleton:
    """The skeleton of `text`, whose `ast.parse` result is `tree`."""
    builder = _Builder(text)
    body = builder.statements(tree.body)
    module = _make(
        cst.Module,
        body=body,
        encoding="utf-8",
        default_indent="    ",
        default_newline="\n",
        has_trailing_newline=text.endswith("\n"),
    )
    return Skeleton(
        module=module, tree=tree, text=text, origin=builder.origin, imports=builder.imports, lines=builder.lines
    )


@dataclass
class _Span:
    """Positions for a skeleton node with no ast node of its own (`WithItem`, `Index`)."""

    lineno: int
    col_offset: int
    end_lineno: int | None
    end_col_offset: int


class _Builder:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = source_lines(text)
        self.origin: dict[int, Any] = {}
        self.imports: list[Any] = []
    def _made(self, node: Any, source: Any) -> Any:
        self.origin[id(node)] = source
        return node

    # ------------------------------------------------------------------ statements
    def statements(self, body: Sequence[ast.stmt]) -> list[Any]:
        """libcst statements: consecutive small statements on one line form one line."""
        out: list[Any] = []
        line: list[Any] = []
        line_end = -1
        for stmt in body:
            if is_small_statement(stmt):
                small = self._small(stmt)
                if line and stmt.lineno == line_end:
                    line.append(small)
                else:
                    line = [small]
                    out.append(self._made(_make(cst.SimpleStatementLine, body=line), stmt))
                line_end = stmt.end_lineno or stmt.lineno
                continue
            line, line_end = [], -1
            out.append(self._compound(stmt))
        return out

    def _suite(self, body: Sequence[ast.stmt]) -> Any:
        first = body[0]
        if is_small_statement(first) and self._follows_code(first):
            # `if x: a; b` - a body on its header's line holds small statements only
            return _make(cst.SimpleStatementSuite, body=[self._small(s) for s in body])
        return _make(cst.IndentedBlock, body=self.statements(body), indent=None)

    def _follows_code(self, stmt: ast.stmt) -> bool:
        """True when code precedes `stmt` on its line (a one-line body), False when it starts
        its line (the first statement of an indented block)."""
        line = self.lines[stmt.lineno - 1]
        before = line[: stmt.col_offset] if line.isascii() else line.encode("utf-8")[: stmt.col_offset].decode("utf-8", "replace")
        return bool(before.strip())

    def _small(self, stmt: ast.stmt) -> Any:
        expr = self.expression
        node: Any
        if isinstance(stmt, ast.Expr):
            node = _make(cst.Expr, value=expr(stmt.value))
        elif isinstance(stmt, ast.Assign):
            targets = [_make(cst.AssignTarget, target=expr(t)) for t in stmt.targets]
            node = _make(cst.Assign, targets=targets, value=expr(stmt.value))
        elif isinstance(stmt, ast.AugAssign):
            node = _make(
                cst.AugAssign,
                target=expr(stmt.target),
                operator=_token(_AUGMENTED[type(stmt.op)]),
                value=expr(stmt.value),
            )
        elif isinstance(stmt, ast.AnnAssign):
            node = _make(
                cst.AnnAssign,
                target=expr(stmt.target),
                annotation=self._annotation(stmt.annotation),
                value=self.optional(stmt.value),
            )
        elif isinstance(stmt, ast.Return):
            node = _make(cst.Return, value=self.optional(stmt.value))
        elif isinstance(stmt, ast.Raise):
            cause = _make(cst.From, item=expr(stmt.cause)) if stmt.cause is not None else None
            node = _make(cst.Raise, exc=self.optional(stmt.exc), cause=cause)
        elif isinstance(stmt, ast.Assert):
            node = _make(cst.Assert, test=expr(stmt.test), msg=self.optional(stmt.msg))
        elif isinstance(stmt, ast.Import):
            node = _make(cst.Import, names=[self._alias(a) for a in stmt.names])
            self.imports.append(node)
        elif isinstance(stmt, ast.ImportFrom):
            names: Any
            if len(stmt.names) == 1 and stmt.names[0].name == "*":
                names = _token(cst.ImportStar)
            else:
                names = [self._alias(a) for a in stmt.names]
            module = _dotted(stmt.module) if stmt.module else None
            dots = [_token(cst.Dot)] * (stmt.level or 0)
            node = _make(cst.ImportFrom, module=module, names=names, relative=dots)
            self.imports.append(node)
        elif isinstance(stmt, ast.Global | ast.Nonlocal):
            items = [_make(cst.NameItem, name=_make(cst.Name, value=n)) for n in stmt.names]
            node = _make(cst.Global if isinstance(stmt, ast.Global) else cst.Nonlocal, names=items)
        elif isinstance(stmt, ast.Delete):
            if len(stmt.targets) == 1:
                target = expr(stmt.targets[0])
            else:
                target = _make(cst.Tuple, elements=[self._element(t) for t in stmt.targets])
            node = _make(cst.Del, target=target)
        elif isinstance(stmt, ast.Pass):
            node = _make(cst.Pass)
        elif isinstance(stmt, ast.Break):
            node = _make(cst.Break)
        elif isinstance(stmt, ast.Continue):
            node = _make(cst.Continue)
        else:  # `type X = ...` (3.12)
            node = _make(cst.TypeAlias, name=expr(stmt.name), value=expr(stmt.value))  # type: ignore[attr-defined]
        return self._made(node, stmt)

    def _compound(self, stmt: ast.stmt) -> Any:
        return self._made(_COMPOUNDS[type(stmt)](self, stmt), stmt)

    def _decorators(self, stmt: Any) -> list[Any]:
        return [self._made(_make(cst.Decorator, decorator=self.expression(d)), d) for d in stmt.decorator_list]

    def _function(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef) -> Any:
        return _make(
            cst.FunctionDef,
            name=self._made(_make(cst.Name, value=stmt.name), stmt),
            params=self._parameters(stmt.args),
            body=self._suite(stmt.body),
            decorators=self._decorators(stmt),
            returns=self._annotation(stmt.returns) if stmt.returns is not None else None,
            asynchronous=_token(cst.Asynchronous) if isinstance(stmt, ast.AsyncFunctionDef) else None,
            type_parameters=None,
        )

    def _class(self, stmt: ast.ClassDef) -> Any:
        return _make(
            cst.ClassDef,
            name=self._made(_make(cst.Name, value=stmt.name), stmt),
            body=self._suite(stmt.body),
            bases=[self._arg(b) for b in stmt.bases],
            keywords=[self._keyword(k) for k in stmt.keywords],
            decorators=self._decorators(stmt),
            type_parameters=None,
        )

    def _else(self, body: list[ast.stmt]) -> Any:
        return _make(cst.Else, body=self._suite(body))

    def _if(self, stmt: ast.If) -> Any:
        orelse: Any = None
        if stmt.orelse:
            only = stmt.orelse[0]
            if len(stmt.orelse) == 1 and isinstance(only, ast.If) and self._is_elif(only):
                orelse = self._made(self._if(only), only)
            else:
                orelse = self._else(stmt.orelse)
        return _make(
            cst.If,
            test=self.expression(stmt.test),
            body=self._suite(stmt.body),
            orelse=orelse,
        )

    def _is_elif(self, node: ast.If) -> bool:
        # an `elif`'s If starts at the keyword; `else:` + `if` starts at the nested `if`
        line = self.lines[node.lineno - 1].encode("utf-8")
        return line[node.col_offset : node.col_offset + 4] == b"elif"

    def _for(self, stmt: ast.For | ast.AsyncFor) -> Any:
        return _make(
            cst.For,
            target=self.expression(stmt.target),
            iter=self.expression(stmt.iter),
            body=self._suite(stmt.body),
            orelse=self._else(stmt.orelse) if stmt.orelse else None,
            asynchronous=_token(cst.Asynchronous) if isinstance(stmt, ast.AsyncFor) else None,
        )

    def _while(self, stmt: ast.While) -> Any:
        return _make(
            cst.While,
            test=self.expression(stmt.test),
            body=self._suite(stmt.body),
            orelse=self._else(stmt.orelse) if stmt.orelse else None,
        )

    def _with(self, stmt: ast.With | ast.AsyncWith) -> Any:
        items = []
        for item in stmt.items:
            value = self.expression(item.context_expr)
            asname = None
            end = item.context_expr
            if item.optional_vars is not None:
                asname = _make(cst.AsName, name=self.expression(item.optional_vars))
                end = item.optional_vars
            with_item = _make(cst.WithItem, item=value, asname=asname)
            start = item.context_expr
            self.origin[id(with_item)] = _Span(start.lineno, start.col_offset, end.end_lineno, end.end_col_offset or 0)
            items.append(with_item)
        return _make(
            cst.With,
            items=items,
            body=self._suite(stmt.body),
            asynchronous=_token(cst.Asynchronous) if isinstance(stmt, ast.AsyncWith) else None,
        )

    def _try(self, stmt: Any) -> Any:
        star = type(stmt).__name__ == "TryStar"
        handlers = []
        for handler in stmt.handlers:
            name = None
            if handler.name:
                name = _make(cst.AsName, name=_make(cst.Name, value=handler.name))
            handlers.append(
                self._made(
                    _make(
                        cst.ExceptStarHandler if star else cst.ExceptHandler,
                        body=self._suite(handler.body),
                        type=self.optional(handler.type),
                        name=name,
                    ),
                    handler,
                )
            )
        orelse = self._else(stmt.orelse) if stmt.orelse else None
        finalbody = _make(cst.Finally, body=self._suite(stmt.finalbody)) if stmt.finalbody else None
        return _make(
            cst.TryStar if star else cst.Try,
            body=self._suite(stmt.body),
            handlers=handlers,
            orelse=orelse,
            finalbody=finalbody,
        )

    def _match(self, stmt: Any) -> Any:
        cases = []
        for case in stmt.cases:
            cases.append(
                _make(
                    cst.MatchCase,
                    # patterns hold no calls; the analysis only walks them
                    pattern=_token(cst.MatchSingleton),
                    body=self._suite(case.body),
                    guard=self.optional(case.guard),
                )
            )
        return _make(cst.Match, subject=self.expression(stmt.subject), cases=cases, indent=None)

    def _parameters(self, args: ast.arguments) -> Any:
        positional = [*args.posonlyargs, *args.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        params = [self._param(a, d) for a, d in zip(positional, defaults, strict=True)]
        posonly = params[: len(args.posonlyargs)]
        star_arg: Any = cst.MaybeSentinel.DEFAULT
        if args.vararg is not None:
            star_arg = self._param(args.vararg, None, "*")
        elif args.kwonlyargs:
            star_arg = _token(cst.ParamStar)
        kwonly = [self._param(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
        return _make(
            cst.Parameters,
            params=params[len(args.posonlyargs) :],
            star_arg=star_arg,
            kwonly_params=kwonly,
            star_kwarg=self._param(args.kwarg, None, "**") if args.kwarg is not None else None,
            posonly_params=posonly,
            posonly_ind=cst.MaybeSentinel.DEFAULT,
        )

    def _param(self, arg: ast.arg, default: ast.expr | None, star: str = "") -> Any:
        return self._made(
            _make(
                cst.Param,
                name=self._made(_make(cst.Name, value=arg.arg), arg),
                annotation=self._annotation(arg.annotation) if arg.annotation is not None else None,
                default=self.optional(default),
                star=star,
            ),
            arg,
        )

    def _annotation(self, expr: ast.expr) -> Any:
        return _make(cst.Annotation, annotation=self.expression(expr))

    def _alias(self, alias: ast.alias) -> Any:
        asname = _make(cst.AsName, name=_make(cst.Name, value=alias.asname)) if alias.asname else None
        return _make(cst.ImportAlias, name=_dotted(alias.name), asname=asname)

    # ------------------------------------------------------------------ expressions
    def optional(self, node: ast.expr | None) -> Any:
        return None if node is None else self.expression(node)

    def expression(self, node: ast.expr) -> Any:
        return self._made(_EXPRESSIONS[type(node)](self, node), node)

    def _name(self, node: ast.Name) -> Any:
        return _make(cst.Name, value=node.id)

    def _attribute(self, node: ast.Attribute) -> Any:
        return _make(cst.Attribute, value=self.expression(node.value), attr=_make(cst.Name, value=node.attr))

    def _call(self, node: ast.Call) -> Any:
        parts: list[tuple[int, int, Any]] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                made = _make(cst.Arg, value=self.expression(arg.value), keyword=None, star="*")
            else:
                made = _make(cst.Arg, value=self.expression(arg), keyword=None, star="")
            parts.append((arg.lineno, arg.col_offset, self._made(made, arg)))
        for keyword in node.keywords:
            parts.append((keyword.lineno, keyword.col_offset, self._keyword(keyword)))
        if node.keywords and node.args:
            parts.sort(key=lambda part: (part[0], part[1]))  # source order, as libcst keeps it
        return _make(cst.Call, func=self.expression(node.func), args=[part[2] for part in parts])

    def _keyword(self, keyword: ast.keyword) -> Any:
        if keyword.arg is None:
            made = _make(cst.Arg, value=self.expression(keyword.value), keyword=None, star="**")
        else:
            name = _make(cst.Name, value=keyword.arg)
            made = _make(cst.Arg, value=self.expression(keyword.value), keyword=name, star="")
        return self._made(made, keyword)

    def _arg(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Starred):
            return self._made(_make(cst.Arg, value=self.expression(node.value), keyword=None, star="*"), node)
        return self._made(_make(cst.Arg, value=self.expression(node), keyword=None, star=""), node)

    def _constant(self, node: ast.Constant) -> Any:
        value = node.value
        if value is None or value is True or value is False:
            return _make(cst.Name, value=str(value))
        if value is Ellipsis:
            return _make(cst.Ellipsis)
        if isinstance(value, bool):  # pragma: no cover - handled above
            return _make(cst.Name, value=str(value))
        if isinstance(value, int):
            # the digits are never read; str() refuses ints over 4300 digits
            return _make(cst.Integer, value=str(value) if value.bit_length() < 10_000 else "0")
        if isinstance(value, float):
            return _make(cst.Float, value=repr(value))
        if isinstance(value, complex):
            return _make(cst.Imaginary, value=repr(value.imag) + "j")
        pieces = self._string_pieces(node)
        if len(pieces) > 1:  # `"a" "b"`: libcst keeps the pieces
            folded = _make(cst.SimpleString, value=pieces[-1])
            for piece in reversed(pieces[:-1]):
                folded = _make(cst.ConcatenatedString, left=_make(cst.SimpleString, value=piece), right=folded)
            return folded
        return _make(cst.SimpleString, value=repr(value))

    def _string_pieces(self, node: ast.expr) -> list[str]:
        """The literals of an implicitly concatenated string, each as evaluable source
        (`["'a'", "'b'"]`), or one piece for a plain literal."""
        segment = _segment(self.lines, node)
        if segment is None:
            return [repr(node.value)]  # type: ignore[attr-defined]
        body = segment.lstrip("rRbBuU")
        quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
        if quote and body.endswith(quote) and body.count(quote[0]) == 2 * len(quote):
            # one literal: its quote character only opens and closes it (most strings)
            return [repr(node.value)]  # type: ignore[attr-defined]
        try:
            tokens = _string_tokens(segment)
        except ValueError:
            return [repr(node.value)]  # type: ignore[attr-defined]
        return tokens if len(tokens) > 1 else [repr(node.value)]  # type: ignore[attr-defined]

    def _subscript(self, node: ast.Subscript) -> Any:
        index = node.slice
        if isinstance(index, ast.Tuple) and index.elts and not self._parenthesised(index):
            elements = [self._subscript_element(e) for e in index.elts]
        else:
            elements = [self._subscript_element(index)]
        return _make(cst.Subscript, value=self.expression(node.value), slice=elements)

    def _parenthesised(self, node: ast.expr) -> bool:
        line = self.lines[node.lineno - 1].encode("utf-8")
        return line[node.col_offset : node.col_offset + 1] == b"("

    def _subscript_element(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Slice):
            inner = self.expression(node)
        else:
            inner = _make(cst.Index, value=self.expression(node))
            self.origin[id(inner)] = node
        return _make(cst.SubscriptElement, slice=inner)

    def _slice(self, node: ast.Slice) -> Any:
        return _make(
            cst.Slice,
            lower=self.optional(node.lower),
            upper=self.optional(node.upper),
            step=self.optional(node.step),
        )

    def _binary(self, node: ast.BinOp) -> Any:
        return _make(
            cst.BinaryOperation,
            left=self.expression(node.left),
            operator=_token(_BINARY[type(node.op)]),
            right=self.expression(node.right),
        )

    def _boolean(self, node: ast.BoolOp) -> Any:
        operator = _token(_BOOLEAN[type(node.op)])
        values = node.values
        if len(values) > MAX_CHAIN:
            raise TooLongChain(f"a chain of {len(values)} boolean operators is too long to parse")
        left = self.expression(values[0])
        for value in values[1:]:
            # libcst nests `a and b and c` to the left: ((a and b) and c)
            combined = _make(cst.BooleanOperation, left=left, operator=operator, right=self.expression(value))
            first = values[0]
            self.origin[id(combined)] = _Span(first.lineno, first.col_offset, value.end_lineno, value.end_col_offset or 0)
            left = combined
        return left

    def _unary(self, node: ast.UnaryOp) -> Any:
        operand = self.expression(node.operand)
        return _make(cst.UnaryOperation, operator=_token(_UNARY[type(node.op)]), expression=operand)

    def _compare(self, node: ast.Compare) -> Any:
        if len(node.ops) > MAX_CHAIN:
            raise TooLongChain(f"a chain of {len(node.ops)} comparisons is too long to parse")
        targets = [
            _make(cst.ComparisonTarget, operator=_token(_COMPARE[type(op)]), comparator=self.expression(c))
            for op, c in zip(node.ops, node.comparators, strict=True)
        ]
        return _make(cst.Comparison, left=self.expression(node.left), comparisons=targets)

    def _element(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Starred):
            return self._made(_make(cst.StarredElement, value=self.expression(node.value)), node)
        return _make(cst.Element, value=self.expression(node))

    def _tuple(self, node: ast.Tuple) -> Any:
        return _make(cst.Tuple, elements=[self._element(e) for e in node.elts])

    def _list(self, node: ast.List) -> Any:
        return _make(cst.List, elements=[self._element(e) for e in node.elts])

    def _set(self, node: ast.Set) -> Any:
        return _make(cst.Set, elements=[self._element(e) for e in node.elts])

    def _dict(self, node: ast.Dict) -> Any:
        elements = []
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                elements.append(_make(cst.StarredDictElement, value=self.expression(value)))
            else:
                elements.append(_make(cst.DictElement, key=self.expression(key), value=self.expression(value)))
        return _make(cst.Dict, elements=elements)

    def _ifexp(self, node: ast.IfExp) -> Any:
        return _make(
            cst.IfExp,
            test=self.expression(node.test),
            body=self.expression(node.body),
            orelse=self.expression(node.orelse),
        )

    def _lambda(self, node: ast.Lambda) -> Any:
        return _make(cst.Lambda, params=self._parameters(node.args), body=self.expression(node.body))

    def _generators(self, generators: list[ast.comprehension]) -> Any:
        inner: Any = None
        for generator in reversed(generators):
            inner = _make(
                cst.CompFor,
                target=self.expression(generator.target),
                iter=self.expression(generator.iter),
                ifs=[_make(cst.CompIf, test=self.expression(test)) for test in generator.ifs],
                inner_for_in=inner,
                asynchronous=_token(cst.Asynchronous) if generator.is_async else None,
            )
        return inner

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> Any:
        node_type = {ast.ListComp: cst.ListComp, ast.SetComp: cst.SetComp, ast.GeneratorExp: cst.GeneratorExp}
        return _make(node_type[type(node)], elt=self.expression(node.elt), for_in=self._generators(node.generators))

    def _dict_comprehension(self, node: ast.DictComp) -> Any:
        return _make(
            cst.DictComp,
            key=self.expression(node.key),
            value=self.expression(node.value),
            for_in=self._generators(node.generators),
        )

    def _await(self, node: ast.Await) -> Any:
        return _make(cst.Await, expression=self.expression(node.value))

    def _yield(self, node: ast.Yield) -> Any:
        return _make(cst.Yield, value=self.optional(node.value))

    def _yield_from(self, node: ast.YieldFrom) -> Any:
        return _make(cst.Yield, value=_make(cst.From, item=self.expression(node.value)))

    def _named(self, node: ast.NamedExpr) -> Any:
        return _make(cst.NamedExpr, target=self.expression(node.target), value=self.expression(node.value))

    def _starred(self, node: ast.Starred) -> Any:
        # a starred expression outside a call or a display (`*a, b = x` targets are displays)
        return _make(cst.StarredElement, value=self.expression(node.value))

    def _fstring(self, node: ast.JoinedStr) -> Any:
        return _make(cst.FormattedString, parts=self._fstring_parts(node.values), start='f"', end='"')

    def _fstring_parts(self, values: list[ast.expr]) -> list[Any]:
        parts: list[Any] = []
        for value in values:
            if isinstance(value, ast.FormattedValue):
                spec = value.format_spec
                parts.append(
                    _make(
                        cst.FormattedStringExpression,
                        expression=self.expression(value.value),
                        conversion=None,
                        format_spec=self._fstring_parts(spec.values) if isinstance(spec, ast.JoinedStr) else None,
                    )
                )
            elif isinstance(value, ast.Constant):
                parts.append(_make(cst.FormattedStringText, value=str(value.value)))
        return parts


# dispatch tables, filled in below the class (functions, not bound methods: a builder that
# held its own bound methods would be a reference cycle, freed only by the cyclic collector)
_EXPRESSIONS: dict[type, Callable[[_Builder, Any], Any]] = {
    ast.Name: _Builder._name,
    ast.Attribute: _Builder._attribute,
    ast.Call: _Builder._call,
    ast.Constant: _Builder._constant,
    ast.Subscript: _Builder._subscript,
    ast.BinOp: _Builder._binary,
    ast.BoolOp: _Builder._boolean,
    ast.UnaryOp: _Builder._unary,
    ast.Compare: _Builder._compare,
    ast.Tuple: _Builder._tuple,
    ast.List: _Builder._list,
    ast.Set: _Builder._set,
    ast.Dict: _Builder._dict,
    ast.IfExp: _Builder._ifexp,
    ast.Lambda: _Builder._lambda,
    ast.ListComp: _Builder._comprehension,
    ast.SetComp: _Builder._comprehension,
    ast.GeneratorExp: _Builder._comprehension,
    ast.DictComp: _Builder._dict_comprehension,
    ast.Await: _Builder._await,
    ast.Yield: _Builder._yield,
    ast.YieldFrom: _Builder._yield_from,
    ast.NamedExpr: _Builder._named,
    ast.Starred: _Builder._starred,
    ast.JoinedStr: _Builder._fstring,
    ast.Slice: _Builder._slice,
}
_COMPOUNDS: dict[type, Callable[[_Builder, Any], Any]] = {
    ast.FunctionDef: _Builder._function,
    ast.AsyncFunctionDef: _Builder._function,
    ast.ClassDef: _Builder._class,
    ast.If: _Builder._if,
    ast.For: _Builder._for,
    ast.AsyncFor: _Builder._for,
    ast.While: _Builder._while,
    ast.With: _Builder._with,
    ast.AsyncWith: _Builder._with,
    ast.Try: _Builder._try,
    ast.Match: _Builder._match,
}
if hasattr(ast, "TryStar"):
    _COMPOUNDS[ast.TryStar] = _Builder._try


# ---------------------------------------------------------------------------- helpers

# what ends a line for Python's tokenizer (and so for ast's line numbers): not `str.splitlines`,
# which also breaks at form feeds, U+2028 and friends
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """`text`'s lines as Python numbers them."""
    return _LINE_BREAK.split(text)



def _dotted(name: str) -> Any:
    parts = name.split(".")
    node: Any = _make(cst.Name, value=parts[0])
    for part in parts[1:]:
        node = _make(cst.Attribute, value=node, attr=_make(cst.Name, value=part))
    return node


def is_small_statement(stmt: ast.stmt) -> bool:
    """A statement libcst groups into a `SimpleStatementLine` (`type X = ...` is one too)."""
    return isinstance(stmt, _SMALL_STATEMENTS) or type(stmt).__name__ == "TypeAlias"

def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None)
    if decorators:
        return min(stmt.lineno, *(d.lineno for d in decorators))
    return stmt.lineno


def _segment(lines: list[str], node: ast.expr) -> str | None:
    if node.end_lineno is None or node.end_col_offset is None:
        return None
    if node.lineno == node.end_lineno:
        line = lines[node.lineno - 1].encode("utf-8")
        return line[node.col_offset : node.end_col_offset].decode("utf-8", errors="replace")
    first = lines[node.lineno - 1].encode("utf-8")[node.col_offset :].decode("utf-8", errors="replace")
    middle = lines[node.lineno : node.end_lineno - 1]
    last = lines[node.end_lineno - 1].encode("utf-8")[: node.end_col_offset].decode("utf-8", errors="replace")
    return "\n".join([first, *middle, last])


def _string_tokens(segment: str) -> list[str]:
    """Split the source of a string expression into its literals (ValueError if unsure)."""
    pieces: list[str] = []
    at = 0
    size = len(segment)
    while at < size:
        char = segment[at]
        if char in " \t\n\r\\(":
            at += 1
            continue
        if char == ")":
            at += 1
            continue
        if char == "#":  # a comment between the pieces
            end = segment.find("\n", at)
            at = size if end < 0 else end
            continue
        start = at
        while at < size and segment[at].isalpha():
            at += 1
        if at >= size or segment[at] not in "'\"":
            raise ValueError(segment)
        quote = segment[at : at + 3] if segment[at : at + 3] in ('"""', "'''") else segment[at]
        prefix = segment[start:at].lower()
        at += len(quote)
        while True:
            if at >= size:
                raise ValueError(segment)
            if segment[at] == "\\" and "r" not in prefix:
                at += 2
                continue
            if segment.startswith(quote, at):
                if "r" in prefix and at > 0 and segment[at - 1] == "\\" and len(quote) == 1:
                    at += 1
                    continue
                at += len(quote)
                break
            at += 1
        pieces.append(segment[start:at])
    if not pieces:
        raise ValueError(segment)
    return pieces
