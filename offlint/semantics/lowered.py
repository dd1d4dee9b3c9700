"""Layer 1: one file lowered to a small closed set of instructions.

Every module body, class body, function and lambda becomes a `Unit` whose instructions read and
write *places* (strings, so a lowered file pickles and caches by content):

    l:<unit>:<name>     a local (a closure reads its enclosing function's local: Python's cells)
    g:<module>:<name>   a module global (also what `module.name` reads)
    c:<class>:<name>    a class attribute (a class body's names)
    t:<unit>:<n>        a temporary
    r:<unit> / y:<unit> what a unit returns / yields

Instructions (tuples):
    ("copy", dst, src)              dst holds what src holds
    ("new", dst, obj)               dst holds a constant object (a function, a class, a container)
    ("load", dst, src, attr)        dst holds src.attr
    ("store", dst, attr, src)       dst.attr holds src
    ("eload", dst, src)             dst holds src's elements
    ("estore", dst, src)            dst's elements hold src
    ("call", site, dst)             the call `site` (Site), its result in dst
    ("with", site, ctx, target)     entering ctx (an __enter__ / a context manager's body)
    ("import", dst, module, name)   `import module` (name None) or `from module import name`
    ("star", module)                `from module import *`
    ("annotate", dst, src)          dst holds an instance of each class src holds (annotations)
    ("super", dst, class, self)     `super()` inside a method of class
    ("class", dst, class, bases)    a class statement: its object and its bases' places

Each call keeps its position and the tests that guard it, so findings and fixes point at source.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from offlint.semantics.names import absolute_module

BUILTINS = frozenset(dir(builtins))
# builtins the core models; other builtin names hold nothing
MODELLED_BUILTINS = frozenset(
    {"property", "staticmethod", "classmethod", "getattr", "setattr", "super", "iter", "next", "list",
     "tuple", "dict", "reversed", "sorted", "enumerate", "zip"}
)


@dataclass
class Site:
    """One call (or one `with` item) in a unit."""

    id: str  # "<unit>@<n>"
    unit: str
    line: int
    col: int
    callee: Any  # the callee's place (a derived call's may be a field)
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    star: Any = None  # *args place
    starstar: Any = None
    method: str | None = None  # `x.method(...)`: the attribute called
    receiver: str | None = None  # its receiver's place
    # literal arguments: positional index or keyword -> the literal (str, bool, int, None)
    literals: tuple[tuple[str, object], ...] = ()
    # tests of the enclosing `if`/`while`s (and of earlier early exits): (place, branch taken)
    guards: tuple[tuple[str, bool], ...] = ()
    decorator: bool = False  # a decorator applied at definition
    receiver_text: str | None = None  # the receiver's source, for the methods rules type (HINTED)
    data_text: str | None = None  # the first argument's source, for a call naming `device=`

    def literal(self, key: str) -> object:
        for k, v in self.literals:
            if k == key:
                return v
        return _MISSING


_MISSING = object()


@dataclass
class Unit:
    id: str
    module: str
    qualname: str  # offlint's local name: `Class.method`, `f.<locals>.g`, `<module>`
    kind: str  # module | class | function | lambda
    name: str
    line: int
    params: tuple[str, ...] = ()  # positional parameters' places, in order
    defaults: int = 0
    vararg: str | None = None
    kwarg: str | None = None
    kwonly: tuple[str, ...] = ()
    param_names: tuple[str, ...] = ()  # positional then keyword-only names
    cls: str | None = None  # the class a method is defined in
    decorated: bool = False
    generator: bool = False  # it yields: a call gives a generator over what it yields
    instructions: list[tuple] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    # `with` statements: (the with's site, the sites of its body)
    regions: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    end_line: int = 0


@dataclass
class ClassDef:
    id: str
    module: str
    name: str
    qualname: str
    line: int
    body: str  # the class body's unit


@dataclass
class LoweredFile:
    module: str
    path: str
    is_package: bool
    units: list[Unit]
    classes: list[ClassDef]
    globals: frozenset[str]  # names the module body binds


# methods whose receiver's objects the per-file rules ask about (stream, event, host tensor)
HINTED = frozenset(
    {"wait", "record", "synchronize", "query", "elapsed_time", "wait_stream", "wait_event", "record_event",
     "record_stream", "to", "cuda", "copy_"}
)


def lower(tree: ast.Module, module: str, path: str, is_package: bool, text: bytes = b"") -> LoweredFile:
    lowering = _Lowering(module, path, is_package)
    lowering.lines = text.splitlines()
    lowering.module_unit(tree)
    return LoweredFile(module, path, is_package, lowering.units, lowering.classes, frozenset(lowering.module_names))


def _bound_names(body: list[ast.stmt], params: list[str]) -> tuple[set[str], set[str], set[str]]:
    """The names a scope binds (its locals), and those it declares global / nonlocal."""
    bound: set[str] = set(params)
    declared_global: set[str] = set()
    declared_nonlocal: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Global):
            declared_global.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            declared_nonlocal.update(node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
            stack.extend(node.decorator_list)
            if not isinstance(node, ast.ClassDef):
                stack.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
            else:
                stack.extend(node.bases)
            continue  # their bodies are their own scopes
        elif isinstance(node, ast.Lambda):
            stack.extend(node.args.defaults)
            continue
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    bound.add(alias.asname or alias.name.split(".")[0])
        elif (isinstance(node, ast.ExceptHandler) and node.name) or (isinstance(node, ast.MatchAs | ast.MatchStar) and node.name):
            bound.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return bound - declared_global - declared_nonlocal, declared_global, declared_nonlocal


class _Scope:
    def __init__(self, unit: Unit, kind: str, bound: set[str], declared_global: set[str], parent: _Scope | None, cls: str | None) -> None:
        self.unit = unit
        self.kind = kind  # module | class | function
        self.bound = bound
        self.declared_global = declared_global
        self.parent = parent
        self.cls = cls  # class id, for class scopes
        self.temps = 0
        self.guards: list[tuple[str, bool]] = []
        self.region_stack: list[list[str]] = []
        self.class_of_method: str | None = None
        self.self_place: str | None = None


class _Lowering:
    def __init__(self, module: str, path: str, is_package: bool) -> None:
        self.module = module
        self.path = path
        self.is_package = is_package
        self.units: list[Unit] = []
        self.classes: list[ClassDef] = []
        self.ids: set[str] = set()
        self.module_names: set[str] = set()
        self.scope: _Scope = None  # type: ignore[assignment]
        self.lines: list[bytes] = []

    # --- units -------------------------------------------------------------------------------
    def _unit_id(self, qualname: str) -> str:
        base = f"{self.module}::{qualname}"
        uid, n = base, 1
        while uid in self.ids:
            n += 1
            uid = f"{base}#{n}"
        self.ids.add(uid)
        return uid

    def module_unit(self, tree: ast.Module) -> None:
        unit = Unit(self._unit_id("<module>"), self.module, "<module>", "module", "<module>", 1)
        self.units.append(unit)
        bound, _, _ = _bound_names(tree.body, [])
        self.module_names = bound
        self.scope = _Scope(unit, "module", bound, set(), None, None)
        self.block(tree.body)

    def function_unit(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, qualname: str, name: str, cls: str | None) -> Unit:
        outer = self.scope
        unit = Unit(self._unit_id(qualname), self.module, qualname, "lambda" if isinstance(node, ast.Lambda) else "function", name, node.lineno, cls=cls)
        unit.end_line = getattr(node, "end_lineno", node.lineno) or node.lineno
        self.units.append(unit)
        args = node.args
        positional = [a.arg for a in args.posonlyargs + args.args]
        names = positional + [a.arg for a in args.kwonlyargs]
        names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        body: list[ast.stmt] = [ast.Return(node.body)] if isinstance(node, ast.Lambda) else list(node.body)
        bound, declared_global, _ = _bound_names(body, names)
        scope = _Scope(unit, "function", bound, declared_global, outer, None)
        unit.params = tuple(f"l:{unit.id}:{p}" for p in positional)
        unit.param_names = tuple(positional + [a.arg for a in args.kwonlyargs])
        unit.defaults = len(args.defaults)
        unit.kwonly = tuple(f"l:{unit.id}:{a.arg}" for a in args.kwonlyargs)
        unit.vararg = f"l:{unit.id}:{args.vararg.arg}" if args.vararg else None
        unit.kwarg = f"l:{unit.id}:{args.kwarg.arg}" if args.kwarg else None
        self.scope = scope
        try:
            for arg in args.posonlyargs + args.args + args.kwonlyargs:
                if arg.annotation is not None:
                    annotation = self._annotation(arg.annotation)
                    if annotation is not None:
                        self.emit(("annotate", f"l:{unit.id}:{arg.arg}", annotation))
            if isinstance(node, ast.Lambda):
                value = self.expr(node.body)
                if value is not None:
                    self.emit(("copy", f"r:{unit.id}", value))
            else:
                self.block(node.body)
        finally:
            self.scope = outer
        return unit

    # --- places ------------------------------------------------------------------------------
    def emit(self, instruction: tuple) -> None:
        self.scope.unit.instructions.append(instruction)

    def temp(self) -> str:
        self.scope.temps += 1
        return f"t:{self.scope.unit.id}:{self.scope.temps}"

    def place(self, name: str) -> str | None:
        """Where a name lives, by Python's scoping rules (LEGB; class scopes are skipped by the
        functions inside them)."""
        scope = self.scope
        if name in scope.declared_global:
            return f"g:{self.module}:{name}"
        if scope.kind == "class" and name in scope.bound:
            return f"c:{scope.cls}:{name}"
        if scope.kind == "function" and name in scope.bound:
            return f"l:{scope.unit.id}:{name}"
        outer = scope.parent
        while outer is not None:
            if outer.kind == "function" and name in outer.bound:
                return f"l:{outer.unit.id}:{name}"
            outer = outer.parent
        if name in self.module_names or name not in BUILTINS:
            return f"g:{self.module}:{name}"
        if name in MODELLED_BUILTINS:
            return f"b:{name}"
        return None

    # --- statements --------------------------------------------------------------------------
    def block(self, body: list[ast.stmt]) -> None:
        pushed = 0
        for stmt in body:
            tested = self.stmt(stmt)
            if tested is not None and _early_exit(stmt):
                # `if test: return`: what follows runs only when the test failed
                self.scope.guards.append((tested[0], not tested[1]))
                pushed += 1
        if pushed:
            del self.scope.guards[len(self.scope.guards) - pushed:]

    def stmt(self, node: ast.stmt) -> tuple[str, bool] | None:
        """Lower one statement; an `if` returns the place it tests and the truth taking it."""
        if isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, ast.Assign):
            value = self.expr(node.value)
            for target in node.targets:
                self.assign(target, value)
        elif isinstance(node, ast.AnnAssign):
            value = self.expr(node.value) if node.value is not None else None
            annotation = self._annotation(node.annotation)
            if annotation is not None:
                holder = self.temp()
                self.emit(("annotate", holder, annotation))
                self.assign(node.target, holder)
            if value is not None:
                self.assign(node.target, value)
        elif isinstance(node, ast.AugAssign):
            self.expr(node.value)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                value = self.expr(node.value)
                if value is not None:
                    self.emit(("copy", f"r:{self.scope.unit.id}", value))
        elif isinstance(node, ast.If | ast.While):
            test, taken = self.test(node.test)
            if test is not None:
                self.scope.guards.append((test, taken))
            self.block(node.body)
            if test is not None:
                self.scope.guards[-1] = (test, not taken)
            self.block(node.orelse)
            if test is not None:
                self.scope.guards.pop()
                return test, taken
        elif isinstance(node, ast.For | ast.AsyncFor):
            source = self.expr(node.iter)
            if source is not None:
                item = self.temp()
                self.emit(("eload", item, source))
                self.assign(node.target, item)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.With | ast.AsyncWith):
            self.with_items(node.items, node.body)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self.block(node.body)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                if handler.type is not None:
                    self.expr(handler.type)
                self.block(handler.body)
            self.block(node.orelse)  # type: ignore[attr-defined]
            self.block(node.finalbody)  # type: ignore[attr-defined]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self.define_function(node)
        elif isinstance(node, ast.ClassDef):
            self.define_class(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.bind(alias.asname, ("import", None, alias.name, None))
                else:
                    head = alias.name.split(".")[0]
                    self.bind(head, ("import", None, head, None))
        elif isinstance(node, ast.ImportFrom):
            source = self._absolute(node.module, node.level)
            if source is None:
                return None
            for alias in node.names:
                if alias.name == "*":
                    if self.scope.kind == "module":
                        self.emit(("star", source))
                    continue
                self.bind(alias.asname or alias.name, ("import", None, source, alias.name))
        elif isinstance(node, ast.Match):
            subject = self.expr(node.subject)
            for case in node.cases:
                if subject is not None:
                    for capture in ast.walk(case.pattern):
                        if isinstance(capture, ast.MatchAs) and capture.name:
                            self.assign(ast.Name(capture.name, ast.Store()), subject)
                self.block(case.body)
        elif isinstance(node, ast.Raise):
            if node.exc is not None:
                self.expr(node.exc)
        elif isinstance(node, ast.Assert):
            self.expr(node.test)
        elif isinstance(node, ast.Delete):
            pass
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child)
        return None

    def bind(self, name: str, instruction: tuple) -> None:
        target = self.place(name)
        if target is None:
            return
        self.emit((instruction[0], target, *instruction[2:]))

    def _absolute(self, module: str | None, level: int) -> str | None:
        return absolute_module("." * level + (module or ""), self.module, self.is_package) or None

    def assign(self, target: ast.expr, value: str | None) -> None:
        if isinstance(target, ast.Name):
            place = self.place(target.id)
            if place is not None and value is not None:
                self.emit(("copy", place, value))
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value)
            if base is not None and value is not None:
                self.emit(("store", base, target.attr, value))
        elif isinstance(target, ast.Subscript):
            base = self.expr(target.value)
            self.expr(target.slice)
            if base is not None and value is not None:
                self.emit(("estore", base, value))
        elif isinstance(target, ast.Tuple | ast.List):
            item = None
            if value is not None:
                item = self.temp()
                self.emit(("eload", item, value))
            for element in target.elts:
                self.assign(element, item)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value)

    def with_items(self, items: list[ast.withitem], body: list[ast.stmt]) -> None:
        if not items:
            self.block(body)
            return
        item, rest = items[0], items[1:]
        context = self.expr(item.context_expr)
        target = self.temp()
        site = self.site(item.context_expr, context)
        self.emit(("with", site.id, context, target))
        if item.optional_vars is not None:
            self.assign(item.optional_vars, target)
        inside: list[str] = []
        for stack in self.scope.region_stack:
            stack.append(site.id)
        self.scope.region_stack.append(inside)
        start = len(self.scope.unit.sites)
        try:
            self.with_items(rest, body)
        finally:
            self.scope.region_stack.pop()
        inside = [s.id for s in self.scope.unit.sites[start:]]
        self.scope.unit.regions.append((site.id, tuple(inside)))

    def define_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = self.scope
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.expr(default)
        if outer.kind == "function":
            qualname = f"{outer.unit.qualname}.<locals>.{node.name}"
        elif outer.kind == "class":
            enclosing = outer.parent
            while enclosing is not None and enclosing.kind == "class":
                enclosing = enclosing.parent
            if enclosing is not None and enclosing.kind == "function":
                qualname = f"{enclosing.unit.qualname}.<locals>.{node.name}"
            else:
                qualname = f"{outer.unit.name}.{node.name}"
        else:
            qualname = node.name
        unit = self.function_unit(node, qualname, node.name, outer.cls if outer.kind == "class" else None)
        unit.decorated = bool(node.decorator_list)
        value = self.temp()
        self.emit(("new", value, ("fn", unit.id)))
        value = self.decorate(node.decorator_list, value)
        place = self.place(node.name)
        if place is not None:
            self.emit(("copy", place, value))

    def decorate(self, decorators: list[ast.expr], value: str) -> str:
        for decorator in reversed(decorators):
            callee = self.expr(decorator)
            result = self.temp()
            site = Site(self._site_id(), self.scope.unit.id, decorator.lineno, decorator.col_offset, callee, (value,), decorator=True, guards=tuple(self.scope.guards))
            self.scope.unit.sites.append(site)
            self.emit(("call", site, result))
            value = result
        return value

    def define_class(self, node: ast.ClassDef) -> None:
        outer = self.scope
        bases = tuple(b for b in (self.expr(base) for base in node.bases) if b is not None)
        for keyword in node.keywords:
            self.expr(keyword.value)
        qualname = node.name if outer.kind == "module" else f"{outer.unit.qualname}.{node.name}"
        body_unit = Unit(self._unit_id(f"{node.name}.<body>" if outer.kind == "module" else f"{qualname}.<body>"), self.module, f"{node.name}.<body>", "class", node.name, node.lineno)
        self.units.append(body_unit)
        cid = f"{self.module}::{qualname}"
        while any(c.id == cid for c in self.classes):
            cid += "'"
        self.classes.append(ClassDef(cid, self.module, node.name, qualname, node.lineno, body_unit.id))
        value = self.temp()
        self.emit(("class", value, cid, bases))
        bound, declared_global, _ = _bound_names(node.body, [])
        scope = _Scope(body_unit, "class", bound, declared_global, outer, cid)
        self.scope = scope
        try:
            self.block(node.body)
        finally:
            self.scope = outer
        value = self.decorate(node.decorator_list, value)
        place = self.place(node.name)
        if place is not None:
            self.emit(("copy", place, value))
            holder = self.temp()
            self.emit(("class", holder, cid, bases))
            self.emit(("copy", place, holder))

    # --- expressions -------------------------------------------------------------------------
    def _site_id(self) -> str:
        return f"{self.scope.unit.id}@{len(self.scope.unit.sites)}"

    def site(self, node: ast.expr, callee: str | None) -> Site:
        site = Site(self._site_id(), self.scope.unit.id, node.lineno, node.col_offset, callee, guards=tuple(self.scope.guards))
        self.scope.unit.sites.append(site)
        return site

    def test(self, node: ast.expr) -> tuple[str | None, bool]:
        """The place a branch tests and the truth that takes the branch: `not x` and
        `x is False` test x, negated."""
        taken = True
        while True:
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                node, taken = node.operand, not taken
            elif (
                isinstance(node, ast.Compare)
                and len(node.ops) == 1
                and isinstance(node.ops[0], ast.Is | ast.Eq | ast.IsNot | ast.NotEq)
                and isinstance(node.comparators[0], ast.Constant)
                and isinstance(node.comparators[0].value, bool)
            ):
                negate = isinstance(node.ops[0], ast.IsNot | ast.NotEq) != (node.comparators[0].value is False)
                node, taken = node.left, taken != negate
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) and taken:
                # every conjunct holds in the body: the first one that tests something guards
                places = [self.test(value) for value in node.values]
                for place, truth in places:
                    if place is not None:
                        return place, truth
                return None, taken
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and not taken:
                places = [self.test(value) for value in node.values]
                for place, truth in places:
                    if place is not None:
                        return place, not truth
                return None, taken
            else:
                return self.expr(node), taken

    def _annotation(self, node: ast.expr) -> str | None:
        """The place holding the classes an annotation names (`Foo`, `Optional[Foo]`,
        `Foo | None`, `"Foo"`)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(node, ast.Subscript):
            inner = node.slice
            elements = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            places = [p for p in (self._annotation(e) for e in elements) if p is not None]
            return self._union(places)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            places = [p for p in (self._annotation(node.left), self._annotation(node.right)) if p is not None]
            return self._union(places)
        if isinstance(node, ast.Name | ast.Attribute):
            return self.expr(node)
        return None

    def _union(self, places: list[str]) -> str | None:
        if not places:
            return None
        if len(places) == 1:
            return places[0]
        joined = self.temp()
        for place in places:
            self.emit(("copy", joined, place))
        return joined

    def expr(self, node: ast.expr | None) -> str | None:
        if node is None:
            return None
        if isinstance(node, ast.Name):
            return self.place(node.id)
        if isinstance(node, ast.Attribute):
            base = self.expr(node.value)
            if base is None:
                return None
            out = self.temp()
            self.emit(("load", out, base, node.attr))
            return out
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Subscript):
            base = self.expr(node.value)
            self.expr(node.slice)
            if base is None:
                return None
            out = self.temp()
            self.emit(("eload", out, base))
            return out
        if isinstance(node, ast.Lambda):
            for default in node.args.defaults:
                self.expr(default)
            parent = self.scope.unit.qualname
            unit = self.function_unit(node, f"{parent}.<lambda@{node.lineno}:{node.col_offset}>", "<lambda>", None)
            out = self.temp()
            self.emit(("new", out, ("fn", unit.id)))
            return out
        if isinstance(node, ast.IfExp):
            self.test(node.test)
            return self._union([p for p in (self.expr(node.body), self.expr(node.orelse)) if p is not None])
        if isinstance(node, ast.BoolOp):
            return self._union([p for p in (self.expr(v) for v in node.values) if p is not None])
        if isinstance(node, ast.NamedExpr):
            value = self.expr(node.value)
            self.assign(node.target, value)
            return value
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            out = self.temp()
            self.emit(("new", out, ("container", self.module, node.lineno, node.col_offset)))
            for element in node.elts:
                value = self.expr(element)
                if value is not None:
                    self.emit(("estore", out, value))
            return out
        if isinstance(node, ast.Dict):
            out = self.temp()
            self.emit(("new", out, ("container", self.module, node.lineno, node.col_offset)))
            for key, item in zip(node.keys, node.values, strict=True):
                self.expr(key)
                value = self.expr(item)
                if value is not None:
                    if key is None:  # {**other}
                        inner = self.temp()
                        self.emit(("eload", inner, value))
                        value = inner
                    self.emit(("estore", out, value))
            return out
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            for generator in node.generators:
                source = self.expr(generator.iter)
                if source is not None:
                    bound = self.temp()
                    self.emit(("eload", bound, source))
                    self.assign(generator.target, bound)
                for condition in generator.ifs:
                    self.expr(condition)
            out = self.temp()
            self.emit(("new", out, ("container", self.module, node.lineno, node.col_offset)))
            elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for element in elements:
                held = self.expr(element)
                if held is not None:
                    self.emit(("estore", out, held))
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add):
            # `[0.0] * n`, `xs + [y]`: a sequence built from a literal one is that sequence
            left, right = self.expr(node.left), self.expr(node.right)
            if isinstance(node.left, ast.List | ast.Tuple | ast.ListComp):
                return left
            if isinstance(node.right, ast.List | ast.Tuple | ast.ListComp):
                return right
            return None
        if isinstance(node, ast.Await | ast.Starred):
            return self.expr(node.value)
        if isinstance(node, ast.Yield | ast.YieldFrom):
            value = self.expr(node.value)
            if value is not None:
                if isinstance(node, ast.YieldFrom):
                    inner = self.temp()
                    self.emit(("eload", inner, value))
                    value = inner
                self.emit(("copy", f"y:{self.scope.unit.id}", value))
            self.scope.unit.generator = True
            return None
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child)
        return None

    def call(self, node: ast.Call) -> str | None:
        func = node.func
        # builtins whose meaning is a load or a store, with a literal attribute name
        if isinstance(func, ast.Name) and self.place(func.id) == f"b:{func.id}":
            if func.id == "getattr" and len(node.args) >= 2 and _literal_str(node.args[1]):
                base = self.expr(node.args[0])
                for extra in node.args[2:]:
                    self.expr(extra)
                if base is None:
                    return None
                out = self.temp()
                self.emit(("load", out, base, node.args[1].value))  # type: ignore[attr-defined]
                return out
            if func.id == "setattr" and len(node.args) == 3 and _literal_str(node.args[1]):
                base, value = self.expr(node.args[0]), self.expr(node.args[2])
                if base is not None and value is not None:
                    self.emit(("store", base, node.args[1].value, value))  # type: ignore[attr-defined]
                return None
            if func.id == "super":
                cls, self_place = self._enclosing_method()
                if cls is None or self_place is None:
                    return None
                out = self.temp()
                self.emit(("super", out, cls, self_place))
                return out
        method = receiver = None
        if isinstance(func, ast.Attribute):
            receiver = self.expr(func.value)
            method = func.attr
            callee = None
            if receiver is not None:
                callee = self.temp()
                self.emit(("load", callee, receiver, method))
        else:
            callee = self.expr(func)
        args: list[str | None] = []
        star = starstar = None
        literals: list[tuple[str, object]] = []
        for index, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                star = self.expr(arg.value)
                continue
            literal = _literal(arg)
            if literal is not _MISSING:
                literals.append((str(index), literal))
            args.append(self.expr(arg))
        kwargs: list[tuple[str, str | None]] = []
        for keyword in node.keywords:
            value = self.expr(keyword.value)
            if keyword.arg is None:
                starstar = value
                continue
            kwargs.append((keyword.arg, value))
            literal = _literal(keyword.value)
            if literal is not _MISSING:
                literals.append((keyword.arg, literal))
        site = Site(
            self._site_id(), self.scope.unit.id, node.lineno, node.col_offset, callee, tuple(args), tuple(kwargs),
            star, starstar, method, receiver, tuple(literals), tuple(self.scope.guards),
        )
        if method in HINTED and isinstance(func, ast.Attribute):
            site.receiver_text = self._segment(func.value)
        if node.args and any(k.arg == "device" for k in node.keywords) and not isinstance(node.args[0], ast.Starred):
            site.data_text = self._segment(node.args[0])  # `torch.tensor(data, device=...)`
        self.scope.unit.sites.append(site)
        out = self.temp()
        self.emit(("call", site, out))
        return out

    def _segment(self, node: ast.expr) -> str | None:
        """The source text of a one-line expression (columns are UTF-8 byte offsets)."""
        if node.end_lineno != node.lineno or not 0 < node.lineno <= len(self.lines) or node.end_col_offset is None:
            return None
        return self.lines[node.lineno - 1][node.col_offset : node.end_col_offset].decode("utf-8", "replace")

    def _enclosing_method(self) -> tuple[str | None, str | None]:
        scope: _Scope | None = self.scope
        while scope is not None and scope.kind != "function":
            scope = scope.parent
        # the innermost function defined directly in a class body
        while scope is not None:
            parent = scope.parent
            if parent is not None and parent.kind == "class":
                unit = scope.unit
                return parent.cls, unit.params[0] if unit.params else None
            scope = parent
        return None, None


def _literal_str(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _literal(node: ast.expr) -> object:
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bool | int | float | type(None)):
        return node.value
    return _MISSING


def _early_exit(stmt: ast.stmt) -> bool:
    """`if test: return` (or raise): the statements after it run only when the test failed."""
    return isinstance(stmt, ast.If) and not stmt.orelse and bool(stmt.body) and isinstance(stmt.body[-1], ast.Return | ast.Raise)


# --- a lowered file as JSON (the pipeline caches it by content) -------------------------------
def _encode(value: object) -> object:
    if isinstance(value, tuple):
        return {"t": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, Site):
        return {"s": [_encode(getattr(value, f.name)) for f in _SITE_FIELDS]}
    return value


def _decode(value: object) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if "t" in value:
            return tuple(_decode(v) for v in value["t"])
        if "s" in value:
            return Site(*(_decode(v) for v in value["s"]))
    return value


def to_json(lowered: LoweredFile) -> dict[str, Any]:
    return {
        "module": lowered.module,
        "package": lowered.is_package,
        "globals": sorted(lowered.globals),
        "classes": [[c.id, c.module, c.name, c.qualname, c.line, c.body] for c in lowered.classes],
        "units": [{f.name: _encode(getattr(u, f.name)) for f in _UNIT_FIELDS} for u in lowered.units],
    }


def from_json(raw: dict[str, Any], path: str) -> LoweredFile:
    """The lowered file `to_json` wrote; ValueError/KeyError/TypeError when it is not one."""
    units = []
    for item in raw["units"]:
        values = {f.name: _decode(item[f.name]) for f in _UNIT_FIELDS}
        values["sites"] = list(values["sites"])
        values["instructions"] = list(values["instructions"])
        values["regions"] = list(values["regions"])
        units.append(Unit(**values))
    classes = [ClassDef(*row) for row in raw["classes"]]
    return LoweredFile(str(raw["module"]), path, bool(raw["package"]), units, classes, frozenset(raw["globals"]))


_SITE_FIELDS = dataclasses.fields(Site)
_UNIT_FIELDS = dataclasses.fields(Unit)
