"""Semantics-preserving rewrites of a seed (libcst codemods), deterministic given a Random.

A variant is a small tree: {relative path: source}. Each transform picks one target (with the
Random it is given) among those it finds, rewrites it and returns the new tree, or None when the
seed has no target (then the variant is skipped, not counted). Every transform keeps each
`# expect:` comment on the line of the statement it marks: markers are trailing comments of
libcst statements, which the rewrites carry along with the statement.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.helpers import get_full_name_for_node

from tests.metamorphic.oracle import PACKAGE

Files = dict[str, str]

# calls whose statement is a wait, record, fork, join or host sync
SYNC_METHODS = {"wait", "record", "wait_event", "wait_stream", "synchronize", "record_event", "record_stream"}
STREAM_METHODS = {"wait_event", "wait_stream", "record_event"}
EVENT_METHODS = {"wait", "record", "query", "elapsed_time"}
# method names torch or Python call by protocol, or that torch objects define: never renamed
PROTECTED = {
    "forward", "backward", "setup_context", "jvp", "vjp", "extra_repr", "state_dict", "load_state_dict",
    "parameters", "named_parameters", "buffers", "named_buffers", "modules", "children", "apply", "to",
    "cuda", "cpu", "train", "eval", "zero_grad", "register_buffer", "register_parameter",
    *SYNC_METHODS, "query", "elapsed_time", "replay", "capture_begin", "capture_end", "reset",
}
EXPECT = re.compile(r"#\s*expect:\s*OFL\d{3}")


# ------------------------------------------------------------------ helpers


def parse(text: str) -> cst.Module:
    return cst.parse_module(text)


def names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

    node.visit(_V())
    return found


def fresh(base: str, used: set[str]) -> str:
    for i in range(1, 1000):
        name = f"{base}{i}"
        if name not in used:
            used.add(name)
            return name
    raise AssertionError(base)


def all_names(files: Files) -> set[str]:
    used: set[str] = set()
    for text in files.values():
        used |= names_in(parse(text))
    return used


def imports_torch(module: cst.Module) -> bool:
    """`import torch` at module level binds the name `torch` to the package."""
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if get_full_name_for_node(alias.name) == "torch" and alias.asname is None:
                            return True
    return False


def stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def comment_of(line: cst.SimpleStatementLine) -> str | None:
    c = line.trailing_whitespace.comment
    return c.value if c is not None else None


def with_comment(line: cst.SimpleStatementLine, text: str | None) -> cst.SimpleStatementLine:
    ws = line.trailing_whitespace
    comment = cst.Comment(text) if text else None
    return line.with_changes(
        trailing_whitespace=ws.with_changes(comment=comment, whitespace=cst.SimpleWhitespace("  " if text else ""))
    )


def next_tag(files: Files) -> str:
    taken = {int(t) for text in files.values() for t in re.findall(r"@m(\d+)", text)}
    return f"@m{max(taken, default=0) + 1}"


def insert_after_imports(module: cst.Module, new: Sequence[cst.BaseStatement]) -> cst.Module:
    """New top-level statements go after the module's leading docstring and imports."""
    body = list(module.body)
    at = 0
    for i, s in enumerate(body):
        if isinstance(s, cst.SimpleStatementLine) and all(
            isinstance(b, (cst.Import, cst.ImportFrom)) or (isinstance(b, cst.Expr) and isinstance(b.value, cst.SimpleString))
            for b in s.body
        ):
            at = i + 1
        else:
            break
    return module.with_changes(body=[*body[:at], *new, *body[at:]])


def add_import(module: cst.Module, line: str) -> cst.Module:
    if line in module.code:
        return module
    return insert_after_imports(module, [stmt(line + "\n")])


def body_start(body: Sequence[cst.BaseStatement]) -> int:
    """Index after a docstring."""
    if body and isinstance(body[0], cst.SimpleStatementLine):
        first = body[0].body[0]
        if isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString)):
            return 1
    return 0


def replace_nodes(root: cst.CSTNode, mapping: dict[cst.CSTNode, cst.CSTNode | cst.FlattenSentinel | cst.RemovalSentinel]) -> cst.CSTNode:
    """Replace nodes (found by identity in `root`) with others."""

    class _T(cst.CSTTransformer):
        def on_leave(self, original, updated):  # type: ignore[no-untyped-def]
            if original in mapping:
                return mapping[original]
            return updated

    return root.visit(_T())


@dataclass
class Ctx:
    """Where a node sits: the enclosing class and function chain."""

    node: cst.CSTNode
    cls: cst.ClassDef | None
    funcs: tuple[cst.FunctionDef, ...]


def collect(module: cst.CSTNode, want: Callable[[cst.CSTNode], bool]) -> list[Ctx]:
    found: list[Ctx] = []
    classes: list[cst.ClassDef] = []
    funcs: list[cst.FunctionDef] = []

    class _V(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if want(node):
                found.append(Ctx(node, classes[-1] if classes else None, tuple(funcs)))
            if isinstance(node, cst.ClassDef):
                classes.append(node)
            elif isinstance(node, cst.FunctionDef):
                funcs.append(node)
            return True

        def on_leave(self, node: cst.CSTNode) -> None:
            if isinstance(node, cst.ClassDef):
                classes.pop()
            elif isinstance(node, cst.FunctionDef):
                funcs.pop()

    module.visit(_V())
    return found


def is_method(cls: cst.ClassDef | None, func: cst.FunctionDef) -> bool:
    if cls is None or func not in cls.body.body:
        return False
    params = func.params.params
    decorated = {get_full_name_for_node(d.decorator) for d in func.decorators}
    return bool(params) and params[0].name.value == "self" and not decorated & {"staticmethod", "classmethod"}


def sync_call(node: cst.CSTNode) -> cst.Call | None:
    """`RECV.m(args)` alone on a line, m a wait/record/fork/join/sync."""
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Expr):
        call = node.body[0].value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in SYNC_METHODS:
            return call
    return None


def dotted(node: cst.CSTNode) -> str | None:
    """`a.b.c` for a chain of names only (libcst's full name also reads through calls)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


def is_module_path(node: cst.BaseExpression) -> bool:
    name = dotted(node)
    return isinstance(node, (cst.Name, cst.Attribute)) and name is not None and name.split(".")[0] in {"torch", "np", "numpy"}


def simple_ref(node: cst.BaseExpression) -> bool:
    """A name or attribute chain (`ev`, `self._load_event`): evaluated twice, same object."""
    return dotted(node) is not None


def has_marker(node: cst.CSTNode) -> bool:
    return bool(EXPECT.search(cst.Module(body=[]).code_for_node(node)))


def guess_type(call_name: str | None, method: str | None = None, receiver: str = "") -> str | None:
    if call_name in {"torch.cuda.Stream", "torch.cuda.current_stream", "torch.cuda.default_stream"}:
        return "torch.cuda.Stream"
    if call_name == "torch.cuda.Event":
        return "torch.cuda.Event"
    if call_name == "torch.cuda.CUDAGraph":
        return "torch.cuda.CUDAGraph"
    if method in STREAM_METHODS:
        return "torch.cuda.Stream"
    if method in EVENT_METHODS:
        return "torch.cuda.Event"
    if method == "record_stream":
        return "torch.Tensor"
    if method == "synchronize":
        low = receiver.lower()
        return "torch.cuda.Stream" if "stream" in low else "torch.cuda.Event" if "event" in low else None
    return None


# ------------------------------------------------------------------ the transforms


@dataclass(frozen=True)
class Transform:
    name: str
    description: str
    fn: Callable[[Files, random.Random], Files | None]

    def __call__(self, files: Files, rng: random.Random) -> Files | None:
        return self.fn(files, rng)


TRANSFORMS: dict[str, Transform] = {}


def transform(name: str, description: str) -> Callable[[Callable[[Files, random.Random], Files | None]], Callable[[Files, random.Random], Files | None]]:
    def register(fn: Callable[[Files, random.Random], Files | None]) -> Callable[[Files, random.Random], Files | None]:
        TRANSFORMS[name] = Transform(name, description, fn)
        return fn

    return register


def per_file(
    files: Files, rng: random.Random, find: Callable[[cst.Module], list[Ctx]], rewrite: Callable[[cst.Module, Ctx, Files], cst.Module | None]
) -> Files | None:
    """Pick one target among every file's, rewrite that file."""
    options = []
    for name in sorted(files):
        module = parse(files[name])
        options.extend((name, module, ctx) for ctx in find(module))
    if not options:
        return None
    name, module, ctx = rng.choice(options)
    new = rewrite(module, ctx, files)
    if new is None:
        return None
    return {**files, name: new.code}


# --- renames


class _Renamer(cst.CSTTransformer):
    """Renames Name nodes, never attribute names or keyword argument names."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.mapping[updated.value]) if updated.value in self.mapping else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def _locals_of(func: cst.FunctionDef, method: bool) -> set[str]:
    found: set[str] = set()
    params = [*func.params.posonly_params, *func.params.params, *func.params.kwonly_params]
    for i, p in enumerate(params):
        if not (method and i == 0):
            found.add(p.name.value)
    for star in (func.params.star_arg, func.params.star_kwarg):
        if isinstance(star, cst.Param):
            found.add(star.name.value)

    def targets(t: cst.BaseExpression) -> None:
        if isinstance(t, cst.Name):
            found.add(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)):
            for el in t.elements:
                targets(el.value)

    class _V(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            targets(n.target)

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            targets(n.target)

        def visit_For(self, n: cst.For) -> None:
            targets(n.target)

        def visit_AsName(self, n: cst.AsName) -> None:
            targets(n.name)  # type: ignore[arg-type]

    func.body.visit(_V())
    return found


def _blocked_names(func: cst.FunctionDef, files: Files) -> set[str]:
    """Names a rename must leave alone: declared global/nonlocal, rebound by a nested function,
    or passed by keyword somewhere (a parameter's name is part of the signature)."""
    blocked: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Global(self, n: cst.Global) -> None:
            blocked.update(i.name.value for i in n.names)

        def visit_Nonlocal(self, n: cst.Nonlocal) -> None:
            blocked.update(i.name.value for i in n.names)

        def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
            if n is not func:
                blocked.update(_locals_of(n, False))
                blocked.add(n.name.value)

        def visit_Lambda(self, n: cst.Lambda) -> None:
            blocked.update(p.name.value for p in n.params.params)

        def visit_ClassDef(self, n: cst.ClassDef) -> None:
            blocked.add(n.name.value)

    func.visit(_V())
    for text in files.values():

        class _K(cst.CSTVisitor):
            def visit_Arg(self, n: cst.Arg) -> None:
                if n.keyword is not None:
                    blocked.add(n.keyword.value)

        parse(text).visit(_K())
    return blocked


@transform("rename_locals", "rename a function's parameters and local variables consistently")
def rename_locals(files: Files, rng: random.Random) -> Files | None:
    used = all_names(files)

    def find(m: cst.Module) -> list[Ctx]:
        out = []
        for ctx in collect(m, lambda n: isinstance(n, cst.FunctionDef)):
            func = ctx.node
            assert isinstance(func, cst.FunctionDef)
            method = is_method(ctx.cls, func) or (ctx.cls is not None and func in ctx.cls.body.body)
            if _locals_of(func, method) - _blocked_names(func, files):
                out.append(ctx)
        return out

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        func = ctx.node
        assert isinstance(func, cst.FunctionDef)
        method = ctx.cls is not None and func in ctx.cls.body.body
        names = sorted(_locals_of(func, method) - _blocked_names(func, files))
        mapping = {n: fresh("v", used) for n in names}
        renamer = _Renamer(mapping)

        def rename_param(p: cst.Param) -> cst.Param:
            return p.with_changes(name=cst.Name(mapping.get(p.name.value, p.name.value)))

        ps = func.params
        params = ps.with_changes(
            posonly_params=[rename_param(p) for p in ps.posonly_params],
            params=[rename_param(p) for p in ps.params],
            kwonly_params=[rename_param(p) for p in ps.kwonly_params],
            star_arg=rename_param(ps.star_arg) if isinstance(ps.star_arg, cst.Param) else ps.star_arg,
            star_kwarg=rename_param(ps.star_kwarg) if ps.star_kwarg else None,
        )
        new = func.with_changes(params=params, body=func.body.visit(renamer))
        return replace_nodes(m, {func: new})  # type: ignore[return-value]

    return per_file(files, rng, find, rewrite)


def _torch_attr_names(files: Files) -> set[str]:
    """Attribute names read off torch objects or modules (`torch.cuda.graph`, `.wait_stream`)."""
    names: set[str] = set()
    for text in files.values():
        for ctx in collect(parse(text), lambda n: isinstance(n, cst.Attribute)):
            full = get_full_name_for_node(ctx.node)
            if full and full.startswith("torch."):
                names.update(full.split(".")[1:])
    return names


@transform("rename_methods", "rename a method (its definitions and every `.name` use) consistently")
def rename_methods(files: Files, rng: random.Random) -> Files | None:
    blocked = PROTECTED | _torch_attr_names(files)
    candidates: set[str] = set()
    for text in files.values():
        for ctx in collect(parse(text), lambda n: isinstance(n, cst.FunctionDef)):
            func = ctx.node
            assert isinstance(func, cst.FunctionDef)
            name = func.name.value
            if ctx.cls is not None and func in ctx.cls.body.body and not name.startswith("__") and name not in blocked:
                candidates.add(name)
    if not candidates:
        return None
    old = rng.choice(sorted(candidates))
    if any(f'"{old}"' in t or f"'{old}'" in t for t in files.values()):
        return None  # looked up by string (getattr, hooks by name)
    new_name = fresh("op", all_names(files))

    class _T(cst.CSTTransformer):
        def leave_Attribute(self, o: cst.Attribute, u: cst.Attribute) -> cst.Attribute:
            return u.with_changes(attr=cst.Name(new_name)) if u.attr.value == old else u

        def leave_FunctionDef(self, o: cst.FunctionDef, u: cst.FunctionDef) -> cst.FunctionDef:
            return u.with_changes(name=cst.Name(new_name)) if u.name.value == old else u

    return {n: parse(t).visit(_T()).code for n, t in files.items()}


@transform("rename_classes", "rename a class and every reference to it")
def rename_classes(files: Files, rng: random.Random) -> Files | None:
    classes = sorted({c.node.name.value for t in files.values() for c in collect(parse(t), lambda n: isinstance(n, cst.ClassDef))})  # type: ignore[attr-defined]
    if not classes:
        return None
    old = rng.choice(classes)
    new_name = fresh("Component", all_names(files))

    class _T(cst.CSTTransformer):
        def leave_Name(self, o: cst.Name, u: cst.Name) -> cst.Name:
            return u.with_changes(value=new_name) if u.value == old else u

        def leave_Attribute(self, o: cst.Attribute, u: cst.Attribute) -> cst.Attribute:
            return u.with_changes(attr=o.attr)

        def leave_Arg(self, o: cst.Arg, u: cst.Arg) -> cst.Arg:
            return u.with_changes(keyword=o.keyword)

    return {n: parse(t).visit(_T()).code for n, t in files.items()}


# --- extract the wait / record / fork / sync into a helper


def _sync_targets(m: cst.Module) -> list[Ctx]:
    return [
        c
        for c in collect(m, lambda n: sync_call(n) is not None)
        if c.funcs and not is_module_path(sync_call(c.node).func.value)  # type: ignore[union-attr]
        and all(a.star == "" for a in sync_call(c.node).args)  # type: ignore[union-attr]
    ]


def _extract(files: Files, rng: random.Random, *, typed: bool, as_method: bool) -> Files | None:
    used = all_names(files)
    tag = next_tag(files)

    def find(m: cst.Module) -> list[Ctx]:
        out = _sync_targets(m)
        if typed:
            out = [c for c in out if imports_torch(m) and _helper_type(c) is not None]
        if as_method:
            out = [c for c in out if c.cls is not None and any(is_method(c.cls, f) for f in c.funcs)]
        return out

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        line = ctx.node
        assert isinstance(line, cst.SimpleStatementLine)
        call = sync_call(line)
        assert call is not None and isinstance(call.func, cst.Attribute)
        method = call.func.attr.value
        helper = fresh(f"_{method}_on", used)
        params, inner_args, outer_args = [], [], []
        for i, arg in enumerate(call.args):
            if arg.keyword is None:
                pname = fresh("arg", used)
                params.append(pname)
                inner_args.append(pname)
                outer_args.append(cst.Module(body=[]).code_for_node(arg.value))
            else:
                params.append(arg.keyword.value)
                inner_args.append(f"{arg.keyword.value}={arg.keyword.value}")
                outer_args.append(f"{arg.keyword.value}={cst.Module(body=[]).code_for_node(arg.value)}")
            del i
        obj = "obj" if "obj" not in params else fresh("obj", used)
        annotation = f": {_helper_type(ctx)}" if typed else ""
        comment = comment_of(line)
        marked = bool(comment and EXPECT.search(comment))
        inner_comment = f"  # alt: {tag}" if marked else ""
        head = ", ".join(["self"] * as_method + [f"{obj}{annotation}", *params])
        definition = f"def {helper}({head}):\n    {obj}.{method}({', '.join(inner_args)}){inner_comment}\n"
        receiver = cst.Module(body=[]).code_for_node(call.func.value)
        callee = f"self.{helper}" if as_method else helper
        new_line = cst.parse_statement(f"{callee}({', '.join([receiver, *outer_args])})\n")
        assert isinstance(new_line, cst.SimpleStatementLine)
        new_line = new_line.with_changes(leading_lines=line.leading_lines)
        new_line = with_comment(new_line, f"{comment} {tag}" if marked else comment)
        mapping: dict[cst.CSTNode, cst.CSTNode | cst.FlattenSentinel | cst.RemovalSentinel] = {line: new_line}
        if as_method:
            assert ctx.cls is not None
            method_def = next(f for f in ctx.funcs if is_method(ctx.cls, f))
            new_def = cst.parse_statement(definition).with_changes(leading_lines=[cst.EmptyLine()])
            m = replace_nodes(m, mapping)  # type: ignore[assignment]
            # the method holding the line was replaced: find it again by name in the class
            return _append_method(m, ctx.cls.name.value, method_def.name.value, new_def)
        m = replace_nodes(m, mapping)  # type: ignore[assignment]
        return insert_after_imports(m, [cst.parse_statement(definition).with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])])

    return per_file(files, rng, find, rewrite)


def _helper_type(ctx: Ctx) -> str | None:
    call = sync_call(ctx.node)
    assert call is not None and isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    recv_name = get_full_name_for_node(receiver) or ""
    if isinstance(receiver, cst.Call):
        return guess_type(get_full_name_for_node(receiver.func), call.func.attr.value)
    return guess_type(None, call.func.attr.value, recv_name)


def _append_method(m: cst.Module, cls_name: str, after: str, new_def: cst.BaseStatement) -> cst.Module:
    class _T(cst.CSTTransformer):
        def leave_ClassDef(self, o: cst.ClassDef, u: cst.ClassDef) -> cst.ClassDef:
            if u.name.value != cls_name:
                return u
            body = list(u.body.body)
            at = next((i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == after), len(body) - 1)
            body.insert(at + 1, new_def)
            return u.with_changes(body=u.body.with_changes(body=body))

    return m.visit(_T())


@transform("extract_helper_untyped", "move the wait/record/fork/sync statement into a module-level helper taking the object (no annotation)")
def extract_helper_untyped(files: Files, rng: random.Random) -> Files | None:
    return _extract(files, rng, typed=False, as_method=False)


@transform("extract_helper_typed", "the same helper, its parameter annotated (torch.cuda.Event / torch.cuda.Stream)")
def extract_helper_typed(files: Files, rng: random.Random) -> Files | None:
    return _extract(files, rng, typed=True, as_method=False)


@transform("extract_helper_method", "move the statement into a new method of the class, called as self.helper(obj)")
def extract_helper_method(files: Files, rng: random.Random) -> Files | None:
    return _extract(files, rng, typed=False, as_method=True)


# --- locals


@transform("introduce_local", "bind the receiver of a wait/record/fork/sync to a local first")
def introduce_local(files: Files, rng: random.Random) -> Files | None:
    used = all_names(files)

    def find(m: cst.Module) -> list[Ctx]:
        return [c for c in _sync_targets(m) if not isinstance(sync_call(c.node).func.value, cst.Name)]  # type: ignore[union-attr]

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        line = ctx.node
        assert isinstance(line, cst.SimpleStatementLine)
        call = sync_call(line)
        assert call is not None and isinstance(call.func, cst.Attribute)
        name = fresh("handle", used)
        bind = cst.parse_statement(f"{name} = {cst.Module(body=[]).code_for_node(call.func.value)}\n")
        bind = bind.with_changes(leading_lines=line.leading_lines)
        new_call = call.with_changes(func=call.func.with_changes(value=cst.Name(name)))
        new_line = line.with_changes(body=[cst.Expr(new_call)], leading_lines=[])
        return replace_nodes(m, {line: cst.FlattenSentinel([bind, new_line])})  # type: ignore[return-value]

    return per_file(files, rng, find, rewrite)


def _uses(node: cst.CSTNode, name: str) -> int:
    count = 0

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            nonlocal count
            count += n.value == name

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    node.visit(_V())
    return count


@transform("inline_local", "inline a local used once, in the very next statement")
def inline_local(files: Files, rng: random.Random) -> Files | None:
    def pairs(m: cst.Module) -> list[Ctx]:
        out = []
        for ctx in collect(m, lambda n: isinstance(n, cst.IndentedBlock)):
            block = ctx.node
            assert isinstance(block, cst.IndentedBlock)
            if not ctx.funcs:
                continue
            func = ctx.funcs[-1]
            for first, second in zip(block.body, block.body[1:], strict=False):
                if not (isinstance(first, cst.SimpleStatementLine) and len(first.body) == 1 and isinstance(first.body[0], cst.Assign)):
                    continue
                assign = first.body[0]
                if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name) or has_marker(first):
                    continue
                name = assign.targets[0].target.value
                if _uses(func, name) == 2 and _uses(second, name) == 1 and isinstance(second, cst.SimpleStatementLine):
                    out.append(Ctx(first, ctx.cls, (*ctx.funcs, second)))  # type: ignore[arg-type]
        return out

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        first = ctx.node
        second = ctx.funcs[-1]
        assert isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Assign)
        name = first.body[0].targets[0].target.value  # type: ignore[attr-defined]
        value = first.body[0].value
        if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

        class _T(cst.CSTTransformer):
            def leave_Name(self, o: cst.Name, u: cst.Name) -> cst.BaseExpression:  # type: ignore[override]
                return value if u.value == name else u

            def leave_Attribute(self, o: cst.Attribute, u: cst.Attribute) -> cst.Attribute:
                return u.with_changes(attr=o.attr)

            def leave_Arg(self, o: cst.Arg, u: cst.Arg) -> cst.Arg:
                return u.with_changes(keyword=o.keyword)

        new_second = second.visit(_T()).with_changes(leading_lines=first.leading_lines)  # type: ignore[union-attr]
        return replace_nodes(m, {first: cst.RemovalSentinel.REMOVE, second: new_second})  # type: ignore[return-value]

    return per_file(files, rng, pairs, rewrite)


# --- how torch is spelled


def _replace_attr_chains(m: cst.Module, mapping: Callable[[str], str | None], *, annotations: bool = True) -> cst.Module:
    class _T(cst.CSTTransformer):
        def visit_Annotation(self, n: cst.Annotation) -> bool:
            return annotations

        def leave_Attribute(self, o: cst.Attribute, u: cst.Attribute) -> cst.BaseExpression:  # type: ignore[override]
            full = dotted(o)
            new = mapping(full) if full else None
            return expr(new) if new is not None else u

    return m.visit(_T())


def _torch_files(files: Files) -> list[str]:
    return [n for n in sorted(files) if imports_torch(parse(files[n])) and "torch." in files[n]]


@transform("import_torch_as", "`import torch as th` and every `torch.` spelled `th.`")
def import_torch_as(files: Files, rng: random.Random) -> Files | None:
    options = _torch_files(files)
    if not options:
        return None
    name = rng.choice(options)
    alias = fresh("th", all_names(files))

    class _T(cst.CSTTransformer):
        def leave_Import(self, o: cst.Import, u: cst.Import) -> cst.Import:
            # from the original: the names inside an import name packages, not bindings
            names = [
                a.with_changes(asname=cst.AsName(name=cst.Name(alias))) if get_full_name_for_node(a.name) == "torch" and a.asname is None else a
                for a in o.names
            ]
            return o.with_changes(names=names)

        def leave_Name(self, o: cst.Name, u: cst.Name) -> cst.Name:
            return u.with_changes(value=alias) if u.value == "torch" else u

        def leave_Attribute(self, o: cst.Attribute, u: cst.Attribute) -> cst.Attribute:
            return u.with_changes(attr=o.attr)

        def leave_ImportFrom(self, o: cst.ImportFrom, u: cst.ImportFrom) -> cst.ImportFrom:
            return o  # `from torch.cuda import Event` names the package, not the binding

        def leave_Arg(self, o: cst.Arg, u: cst.Arg) -> cst.Arg:
            return u.with_changes(keyword=o.keyword)

    module = parse(files[name])
    # functions that bind `torch` locally (an import inside a function) keep it
    if any(isinstance(c.node, cst.Import) for c in collect(module, lambda n: isinstance(n, cst.Import)) if c.funcs):
        return None
    return {**files, name: module.visit(_T()).code}


# symbols of torch.cuda imported by name: `from torch.cuda import Event as E`
FROM_IMPORTS = {
    "torch.cuda.Event": "E",
    "torch.cuda.Stream": "S",
    "torch.cuda.current_stream": "cur_stream",
    "torch.cuda.stream": "use_stream",
    "torch.cuda.graph": "graph_ctx",
    "torch.cuda.CUDAGraph": "Graph",
    "torch.cuda.synchronize": "sync_all",
    "torch.cuda.is_current_stream_capturing": "capturing",
}


@transform("from_import_alias", "`from torch.cuda import Event as E` (or Stream, current_stream, graph, ...) for every use")
def from_import_alias(files: Files, rng: random.Random) -> Files | None:
    options = [(n, full) for n in _torch_files(files) for full in FROM_IMPORTS if full + "(" in files[n] or full + ")" in files[n] or full + "," in files[n] or full + "]" in files[n]]
    if not options:
        return None
    name, full = rng.choice(options)
    used = all_names(files)
    alias = fresh(FROM_IMPORTS[full], used)
    module = _replace_attr_chains(parse(files[name]), lambda f: alias if f == full else None)
    module = add_import(module, f"from torch.cuda import {full.rsplit('.', 1)[1]} as {alias}")
    return {**files, name: module.code}


# torch.cuda spelled through the device-generic API (PyTorch >= 2.6)
GENERIC = {
    "torch.cuda.Stream": "torch.Stream",
    "torch.cuda.Event": "torch.Event",
    "torch.cuda.current_stream": "torch.accelerator.current_stream",
    "torch.cuda.synchronize": "torch.accelerator.synchronize",
    "torch.cuda.set_stream": "torch.accelerator.set_stream",
}


@transform("generic_device_api", "torch.cuda.Stream/Event/current_stream/synchronize as torch.Stream/torch.Event/torch.accelerator.*")
def generic_device_api(files: Files, rng: random.Random) -> Files | None:
    options = [n for n in _torch_files(files) if any(k in files[n] for k in GENERIC)]
    if not options:
        return None
    name = rng.choice(options)
    return {**files, name: _replace_attr_chains(parse(files[name]), GENERIC.get).code}


@transform("getattr_device", "`torch.cuda.X` spelled `getattr(torch, DEVICE).X`, DEVICE a module constant (or the literal)")
def getattr_device(files: Files, rng: random.Random) -> Files | None:
    options = [n for n in _torch_files(files) if "torch.cuda." in files[n]]
    if not options:
        return None
    name = rng.choice(options)
    literal = rng.random() < 0.5
    const = fresh("DEVICE", all_names(files))
    spelled = 'getattr(torch, "cuda")' if literal else f"getattr(torch, {const})"
    module = _replace_attr_chains(parse(files[name]), lambda f: spelled + f[len("torch.cuda") :] if f.startswith("torch.cuda.") else None, annotations=False)
    if not literal:
        module = insert_after_imports(module, [stmt(f'{const} = "cuda"\n')])
    return {**files, name: module.code}


# --- move a class or function into another module of the tree


def _module_bindings(m: cst.Module) -> tuple[set[str], dict[str, cst.BaseStatement]]:
    """Names bound by imports, and every other top-level binding with its statement."""
    imported: set[str] = set()
    others: dict[str, cst.BaseStatement] = {}
    for s in m.body:
        if isinstance(s, (cst.ClassDef, cst.FunctionDef)):
            others[s.name.value] = s
        elif isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    for a in small.names:
                        bound = a.asname.name if a.asname else a.name
                        full = get_full_name_for_node(bound)
                        if full:
                            imported.add(full.split(".")[0])
                elif isinstance(small, (cst.Assign, cst.AnnAssign)):
                    targets = small.targets if isinstance(small, cst.Assign) else [small]
                    for t in targets:
                        if isinstance(t.target, cst.Name):
                            others[t.target.value] = s
        else:
            for n in names_in(s):
                others.setdefault(n, s)
    return imported, others


def _as_package(files: Files) -> Files:
    """A one-file variant becomes `pkg/<module>.py` with `pkg/__init__.py`."""
    if len(files) > 1:
        return files
    ((name, text),) = files.items()
    module = re.sub(r"\W", "_", name[:-3].lower())
    return {f"{PACKAGE}/__init__.py": "", f"{PACKAGE}/{module}.py": text}


@transform("move_to_module", "move a class or function into another module of the tree and import it (relative or absolute)")
def move_to_module(files: Files, rng: random.Random) -> Files | None:
    options = []
    for name in sorted(files):
        m = parse(files[name])
        _, others = _module_bindings(m)
        for s in m.body:
            if isinstance(s, (cst.ClassDef, cst.FunctionDef)):
                deps = (names_in(s) - {s.name.value}) & set(others)
                if not deps:
                    options.append((name, s.name.value))
    if not options:
        return None
    source_name, moved = rng.choice(options)
    tree = _as_package(files)
    if source_name not in tree:
        source_name = next(n for n in tree if n.endswith(".py") and not n.endswith("__init__.py"))
    m = parse(tree[source_name])
    target = fresh("helpers", {n.rsplit("/", 1)[-1][:-3] for n in tree})
    node = next(s for s in m.body if isinstance(s, (cst.ClassDef, cst.FunctionDef)) and s.name.value == moved)
    header = [
        with_comment(s, None).with_changes(leading_lines=[])  # a copied import keeps no marker
        for s in m.body
        if isinstance(s, cst.SimpleStatementLine) and all(isinstance(b, (cst.Import, cst.ImportFrom)) for b in s.body)
    ]
    new_module = cst.Module(body=[*header, node.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])])
    relative = rng.random() < 0.5
    line = f"from .{target} import {moved}" if relative else f"from {PACKAGE}.{target} import {moved}"
    rest = m.with_changes(body=[s for s in m.body if s is not node])
    rest = insert_after_imports(rest, [stmt(line + "\n")])
    # the new module's imports precede any `from __future__`-free code: keep future imports first
    return {**tree, source_name: rest.code, f"{PACKAGE}/{target}.py": new_module.code}


# --- hand objects in through a constructor or a parameter

CREATED = {"torch.cuda.Stream", "torch.cuda.Event", "torch.cuda.CUDAGraph"}


def _init_creations(m: cst.Module) -> list[Ctx]:
    """`self.x = torch.cuda.Stream(...)` at the top level of `__init__`, arguments constant."""
    out = []
    for ctx in collect(m, lambda n: isinstance(n, cst.FunctionDef) and n.name.value == "__init__"):
        init = ctx.node
        assert isinstance(init, cst.FunctionDef)
        if ctx.cls is None or init.params.star_kwarg or isinstance(init.params.star_arg, cst.Param) or init.params.kwonly_params:
            continue
        for s in init.body.body:
            if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Assign):
                a = s.body[0]
                t = a.targets[0].target
                if (
                    len(a.targets) == 1 and isinstance(t, cst.Attribute) and get_full_name_for_node(t.value) == "self"
                    and isinstance(a.value, cst.Call) and get_full_name_for_node(a.value.func) in CREATED
                    and not names_in(a.value) - names_in(a.value.func) - {"True", "False", "None"}
                    and not has_marker(s)
                ):
                    out.append(Ctx(s, ctx.cls, (init,)))
    return out


def _ctor_param(files: Files, rng: random.Random, typed: bool) -> Files | None:
    used = all_names(files)

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        line = ctx.node
        init = ctx.funcs[0]
        assert isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.Assign)
        attr = line.body[0].targets[0].target.attr.value  # type: ignore[attr-defined]
        call = line.body[0].value
        kind = get_full_name_for_node(call.func)  # type: ignore[attr-defined]
        pname = attr.lstrip("_") if attr.lstrip("_") not in used and attr.lstrip("_").isidentifier() else fresh("handed", used)
        annotation = cst.Annotation(expr(f"{kind} | None")) if typed else None
        param = cst.Param(name=cst.Name(pname), annotation=annotation, default=cst.Name("None"),
                          equal=cst.AssignEqual(cst.SimpleWhitespace(" " if typed else ""), cst.SimpleWhitespace(" " if typed else "")))
        params = init.params.with_changes(params=[*init.params.params, param])
        value = cst.Module(body=[]).code_for_node(call)
        new_line = stmt(f"self.{attr} = {pname} if {pname} is not None else {value}\n").with_changes(leading_lines=line.leading_lines)
        new_init = init.with_changes(params=params, body=replace_nodes(init.body, {line: new_line}))
        return replace_nodes(m, {init: new_init})  # type: ignore[return-value]

    return per_file(files, rng, _init_creations, rewrite)


@transform("ctor_param_untyped", "the stream/event/graph made in __init__ can be handed in: `def __init__(self, ..., s=None)`")
def ctor_param_untyped(files: Files, rng: random.Random) -> Files | None:
    return _ctor_param(files, rng, typed=False)


@transform("ctor_param_typed", "the same, the parameter annotated `torch.cuda.Stream | None`")
def ctor_param_typed(files: Files, rng: random.Random) -> Files | None:
    return _ctor_param(files, rng, typed=True)


def _hoistable(m: cst.Module) -> list[Ctx]:
    """A function whose first statement binds a local from an expression of globals (and self):
    the binding can move to a caller that hands it in."""
    out = []
    for ctx in collect(m, lambda n: isinstance(n, cst.FunctionDef)):
        func = ctx.node
        assert isinstance(func, cst.FunctionDef)
        if func.decorators or func.asynchronous or func.name.value.startswith("__"):
            continue
        body = func.body.body
        i = body_start(body)
        if i >= len(body) or not isinstance(body[i], cst.SimpleStatementLine):
            continue
        first = body[i]
        if len(first.body) != 1 or not isinstance(first.body[0], cst.Assign) or has_marker(first):  # type: ignore[union-attr]
            continue
        assign = first.body[0]  # type: ignore[union-attr]
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            continue
        params = {p.name.value for p in (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params)}
        for star in (func.params.star_arg, func.params.star_kwarg):
            if isinstance(star, cst.Param):
                params.add(star.name.value)
        free = names_in(assign.value)
        method = ctx.cls is not None and func in ctx.cls.body.body
        if method and not is_method(ctx.cls, func):
            continue
        if (free & params) - ({"self"} if method else set()) or assign.targets[0].target.value in params:
            continue
        if any(isinstance(c.node, (cst.Yield, cst.Nonlocal)) for c in collect(func.body, lambda n: isinstance(n, (cst.Yield, cst.Nonlocal)))):
            continue
        if len(ctx.funcs) > 0 and not method:
            continue  # nested functions: keep to module level and methods
        out.append(Ctx(first, ctx.cls, (func,)))
    return out


def _hoist(files: Files, rng: random.Random, typed: bool) -> Files | None:
    used = all_names(files)

    def find(m: cst.Module) -> list[Ctx]:
        out = _hoistable(m)
        if typed:
            out = [c for c in out if imports_torch(m) and _hoist_type(c, _classes(m)) is not None]
        return out

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        first = ctx.node
        func = ctx.funcs[0]
        assert isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Assign)
        local = first.body[0].targets[0].target.value  # type: ignore[attr-defined]
        value = cst.Module(body=[]).code_for_node(first.body[0].value)
        method = ctx.cls is not None
        impl = fresh(f"_{func.name.value.lstrip('_')}_with_", used)
        ps = func.params
        forwarded = [p.name.value for p in ps.posonly_params] + [p.name.value for p in ps.params][1 if method else 0 :]
        if isinstance(ps.star_arg, cst.Param):
            forwarded.append("*" + ps.star_arg.name.value)
        forwarded += [f"{p.name.value}={p.name.value}" for p in ps.kwonly_params]
        if ps.star_kwarg:
            forwarded.append("**" + ps.star_kwarg.name.value)
        callee = f"self.{impl}" if method else impl
        wrapper_body = cst.IndentedBlock(body=[stmt(f"return {callee}({', '.join([value, *forwarded])})\n")])
        wrapper = func.with_changes(body=wrapper_body)
        annotation = cst.Annotation(expr(_hoist_type(ctx, _classes(m)) or "object")) if typed else None
        handed = cst.Param(name=cst.Name(local), annotation=annotation)
        plain = list(ps.params)
        new_params = [*plain[:1], handed, *plain[1:]] if method else [handed, *plain]
        if ps.posonly_params and not method:
            impl_params = ps.with_changes(posonly_params=[handed, *ps.posonly_params])
        else:
            impl_params = ps.with_changes(params=new_params)
        body = list(func.body.body)
        body.remove(first)
        impl_def = func.with_changes(name=cst.Name(impl), params=impl_params, body=func.body.with_changes(body=body),
                                     leading_lines=[cst.EmptyLine()] if method else [cst.EmptyLine(), cst.EmptyLine()])
        return replace_nodes(m, {func: cst.FlattenSentinel([wrapper, impl_def])})  # type: ignore[return-value]

    return per_file(files, rng, find, rewrite)


def _hoist_type(ctx: Ctx, classes: set[str]) -> str | None:
    first = ctx.node
    assert isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Assign)
    value = first.body[0].value
    if isinstance(value, cst.Call):
        name = get_full_name_for_node(value.func)
        if name and name in classes:
            return name
        return guess_type(name)
    return None


@transform("hoist_to_param_untyped", "a local made at a function's start is made by a wrapper and handed in as a parameter")
def hoist_to_param_untyped(files: Files, rng: random.Random) -> Files | None:
    return _hoist(files, rng, typed=False)


@transform("hoist_to_param_typed", "the same, the parameter annotated (torch.cuda.Stream, torch.cuda.Event, ...)")
def hoist_to_param_typed(files: Files, rng: random.Random) -> Files | None:
    return _hoist(files, rng, typed=True)


def _classes(m: cst.Module) -> set[str]:
    return {s.name.value for s in m.body if isinstance(s, cst.ClassDef)}


# --- keep the object in a container, a dataclass field or a module global


def _self_attr(node: cst.CSTNode, attr: str | None = None) -> bool:
    return (
        isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"
        and (attr is None or node.attr.value == attr)
    )


def _held_candidates(m: cst.Module, files: Files) -> list[Ctx]:
    """(class, attribute): assigned at __init__'s top level, read only as `self.x` in the
    class (no other receiver reads `.x` anywhere in the tree)."""
    out = []
    foreign: set[str] = set()
    for text in files.values():
        for c in collect(parse(text), lambda n: isinstance(n, cst.Attribute) and not _self_attr(n)):
            foreign.add(c.node.attr.value)  # type: ignore[attr-defined]
    for ctx in collect(m, lambda n: isinstance(n, cst.FunctionDef) and n.name.value == "__init__"):
        init = ctx.node
        assert isinstance(init, cst.FunctionDef)
        if ctx.cls is None or not is_method(ctx.cls, init):
            continue
        seen: set[str] = set()
        for s in init.body.body:
            if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Assign):
                t = s.body[0].targets[0].target
                if _self_attr(t) and t.attr.value not in foreign and t.attr.value not in seen and not t.attr.value.startswith("__"):  # type: ignore[attr-defined]
                    seen.add(t.attr.value)  # type: ignore[attr-defined]
                    out.append(Ctx(s, ctx.cls, (init,)))
    return out


def _interesting(ctx: Ctx) -> bool:
    text = cst.Module(body=[]).code_for_node(ctx.node).lower()
    return any(k in text for k in ("stream", "event", "graph", "offload", "prefetch"))


def _hold(files: Files, rng: random.Random, how: str) -> Files | None:
    used = all_names(files)

    def find(m: cst.Module) -> list[Ctx]:
        found = _held_candidates(m, files)
        return [c for c in found if _interesting(c)] or found

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        line = ctx.node
        cls = ctx.cls
        assert isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.Assign) and cls is not None
        attr = line.body[0].targets[0].target.attr.value  # type: ignore[attr-defined]
        holder = fresh("_held", used)
        if how == "dict":
            access, init = f'self.{holder}["{attr}"]', f"self.{holder} = {{}}"
        elif how == "list":
            access, init = f"self.{holder}[0]", f"self.{holder} = [None]"
        elif how == "dataclass":
            dc = fresh("_State", used)
            access, init = f"self.{holder}.{attr}", f"self.{holder} = {dc}()"
        else:
            glob = fresh(f"_{attr.strip('_').upper()}_", used)
            access, init = glob, ""
        replacement = expr(access)

        class _T(cst.CSTTransformer):
            def leave_Attribute(self, o: cst.Attribute, u: cst.Attribute) -> cst.BaseExpression:  # type: ignore[override]
                return replacement if _self_attr(o, attr) else u

        stores: set[cst.CSTNode] = set()
        if how == "global":
            for c in collect(cls, lambda n: isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign))):
                target = c.node.target  # type: ignore[attr-defined]
                if _self_attr(target, attr):
                    stores.update(c.funcs)

        class _G(cst.CSTTransformer):
            """`global` in every function that assigns the global (and its enclosing ones)."""

            def leave_FunctionDef(self, o: cst.FunctionDef, u: cst.FunctionDef) -> cst.FunctionDef:
                if o not in stores:
                    return u
                body = list(u.body.body)
                at = body_start(body)
                body.insert(at, stmt(f"global {glob}\n"))
                return u.with_changes(body=u.body.with_changes(body=body))

        new_cls = cls.visit(_G()) if how == "global" else cls
        # the holder is made just before the attribute's first assignment in __init__
        if init:
            marked_line = line

            class _I(cst.CSTTransformer):
                def leave_SimpleStatementLine(self, o: cst.SimpleStatementLine, u: cst.SimpleStatementLine) -> cst.BaseStatement | cst.FlattenSentinel:  # type: ignore[override]
                    if o is marked_line:
                        return cst.FlattenSentinel([stmt(init + "\n").with_changes(leading_lines=u.leading_lines), u.with_changes(leading_lines=[])])
                    return u

            new_cls = cls.visit(_I())
        new_cls = new_cls.visit(_T())
        m = replace_nodes(m, {cls: new_cls})  # type: ignore[assignment]
        if how == "dataclass":
            value = line.body[0].value
            kind = guess_type(get_full_name_for_node(value.func)) if isinstance(value, cst.Call) else None
            annotation = f"{kind} | None" if kind else "object"
            m = insert_after_imports(m, [stmt(f"@dataclasses.dataclass\nclass {dc}:\n    {attr}: {annotation} = None\n").with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])])
            m = add_import(m, "import dataclasses")
        if how == "global":
            m = insert_after_imports(m, [stmt(f"{glob} = None\n").with_changes(leading_lines=[cst.EmptyLine()])])
        return m

    return per_file(files, rng, find, rewrite)


@transform("hold_in_dict", "keep a stream/event attribute in a dict on self: `self._held[\"x\"]`")
def hold_in_dict(files: Files, rng: random.Random) -> Files | None:
    return _hold(files, rng, "dict")


@transform("hold_in_list", "keep it in a one-element list on self: `self._held[0]`")
def hold_in_list(files: Files, rng: random.Random) -> Files | None:
    return _hold(files, rng, "list")


@transform("hold_in_dataclass", "keep it in a dataclass field: `self._held.x`")
def hold_in_dataclass(files: Files, rng: random.Random) -> Files | None:
    return _hold(files, rng, "dataclass")


@transform("hold_in_global", "keep it in a module global (the same object for one instance)")
def hold_in_global(files: Files, rng: random.Random) -> Files | None:
    return _hold(files, rng, "global")


# --- inheritance


def _movable_method(func: cst.FunctionDef) -> bool:
    text = cst.Module(body=[]).code_for_node(func)
    return "super(" not in text and "__class__" not in text and not re.search(r"\.__[a-z]\w*[a-z0-9]_?\b(?<!__)", text)


@transform("method_to_base", "define a method (or all but __init__) on a new base class the class inherits from")
def method_to_base(files: Files, rng: random.Random) -> Files | None:
    used = all_names(files)

    def find(m: cst.Module) -> list[Ctx]:
        out = []
        for s in m.body:
            if isinstance(s, cst.ClassDef):
                for f in s.body.body:
                    if isinstance(f, cst.FunctionDef) and f.name.value != "__init__" and _movable_method(f):
                        out.append(Ctx(f, s, ()))
        return out

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        cls = ctx.cls
        assert cls is not None
        everything = rng.random() < 0.5
        moved = [f for f in cls.body.body if isinstance(f, cst.FunctionDef) and f.name.value != "__init__" and _movable_method(f)] if everything else [ctx.node]
        base = fresh(f"_{cls.name.value.lstrip('_')}Base", used)
        rest = [s for s in cls.body.body if s not in moved] or [stmt("pass\n")]
        first = moved[0].with_changes(leading_lines=[])  # type: ignore[attr-defined]
        base_def = cst.ClassDef(name=cst.Name(base), body=cst.IndentedBlock(body=[first, *moved[1:]]), leading_lines=cls.leading_lines)
        bases = [cst.Arg(cst.Name(base)), *cls.bases]
        new_cls = cls.with_changes(
            bases=bases, body=cls.body.with_changes(body=rest), leading_lines=[cst.EmptyLine(), cst.EmptyLine()],
            lpar=cst.LeftParen(), rpar=cst.RightParen(),
        )
        return replace_nodes(m, {cls: cst.FlattenSentinel([base_def, new_cls])})  # type: ignore[return-value]

    return per_file(files, rng, find, rewrite)


# --- hooks as closures, partials, lambdas


def _method_refs(m: cst.Module) -> list[Ctx]:
    """`self.M` used as a value (not called): a hook or forward handed to torch. Ctx.funcs holds
    (the method M, the function holding the reference)."""
    called: set[cst.CSTNode] = set()
    for c in collect(m, lambda n: isinstance(n, cst.Call)):
        called.add(c.node.func)  # type: ignore[attr-defined]
    out = []
    for c in collect(m, lambda n: _self_attr(n) and n not in called):
        if c.cls is None or not c.funcs:
            continue
        attr = c.node.attr.value  # type: ignore[attr-defined]
        method = next((f for f in c.cls.body.body if isinstance(f, cst.FunctionDef) and f.name.value == attr), None)
        if method is None or method.decorators or not is_method(c.cls, method) or method in c.funcs:
            continue
        if not all(p.default is None for p in method.params.params) or method.params.kwonly_params:
            continue
        out.append(Ctx(c.node, c.cls, (method, c.funcs[-1])))
    return out


def _arity(method: cst.FunctionDef) -> list[str]:
    return [p.name.value for p in method.params.params[1:]]


@transform("hook_as_lambda", "a method handed as a hook is wrapped in a lambda: `lambda m, a: self.hook(m, a)`")
def hook_as_lambda(files: Files, rng: random.Random) -> Files | None:
    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module | None:
        method = ctx.funcs[0]
        if isinstance(method.params.star_arg, cst.Param) or method.params.star_kwarg:
            return None
        args = ", ".join(_arity(method))
        lam = expr(f"lambda {args}: self.{method.name.value}({args})" if args else f"lambda: self.{method.name.value}()")
        return replace_nodes(m, {ctx.node: lam})  # type: ignore[return-value]

    return per_file(files, rng, _method_refs, rewrite)


@transform("hook_as_partial", "a method handed as a hook becomes `functools.partial(Class.hook, self)`")
def hook_as_partial(files: Files, rng: random.Random) -> Files | None:
    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        assert ctx.cls is not None
        part = expr(f"functools.partial({ctx.cls.name.value}.{ctx.funcs[0].name.value}, self)")
        return add_import(replace_nodes(m, {ctx.node: part}), "import functools")  # type: ignore[arg-type]

    return per_file(files, rng, _method_refs, rewrite)


@transform("hook_as_closure", "a method handed as a hook is defined instead as a closure in the method that registers it (often __init__)")
def hook_as_closure(files: Files, rng: random.Random) -> Files | None:
    def find(m: cst.Module) -> list[Ctx]:
        out = []
        for c in _method_refs(m):
            method, holder = c.funcs
            name = method.name.value
            refs = sum(cst.Module(body=[]).code_for_node(x).count(f".{name}") for x in m.body)
            if refs == 1 and is_method(c.cls, holder) and _movable_method(method):
                out.append(c)
        return out

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        method, holder = ctx.funcs
        name = method.name.value
        closure = method.with_changes(params=method.params.with_changes(params=method.params.params[1:]), leading_lines=[])
        new_holder_body = replace_nodes(holder.body, {ctx.node: cst.Name(name)})
        body = list(new_holder_body.body)  # type: ignore[attr-defined]
        body.insert(body_start(body), closure)
        new_holder = holder.with_changes(body=new_holder_body.with_changes(body=body))
        return replace_nodes(m, {holder: new_holder, method: cst.RemovalSentinel.REMOVE})  # type: ignore[return-value]

    return per_file(files, rng, find, rewrite)


# --- guards before the wait


def _guardable(m: cst.Module) -> list[Ctx]:
    out = []
    for c in _sync_targets(m):
        call = sync_call(c.node)
        assert call is not None and isinstance(call.func, cst.Attribute)
        if (call.func.attr.value in {"wait_event", "wait_stream"} and call.args and simple_ref(call.args[0].value)) or (simple_ref(call.func.value) and not is_module_path(call.func.value)):
            out.append(c)
    return out


def _guard(files: Files, rng: random.Random, style: str) -> Files | None:
    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        line = ctx.node
        assert isinstance(line, cst.SimpleStatementLine)
        call = sync_call(line)
        assert call is not None and isinstance(call.func, cst.Attribute)
        target = call.args[0].value if call.func.attr.value in {"wait_event", "wait_stream"} and call.args and simple_ref(call.args[0].value) else call.func.value
        name = cst.Module(body=[]).code_for_node(target)
        code = f"assert {name} is not None\n" if style == "assert" else f'if {name} is None:\n    raise RuntimeError("{name} is not set")\n'
        guard = stmt(code).with_changes(leading_lines=line.leading_lines)
        return replace_nodes(m, {line: cst.FlattenSentinel([guard, line.with_changes(leading_lines=[])])})  # type: ignore[return-value]

    return per_file(files, rng, _guardable, rewrite)


@transform("guard_assert", "`assert x is not None` before the wait/record/fork/sync")
def guard_assert(files: Files, rng: random.Random) -> Files | None:
    return _guard(files, rng, "assert")


@transform("guard_raise", "`if x is None: raise RuntimeError(...)` before the wait/record/fork/sync")
def guard_raise(files: Files, rng: random.Random) -> Files | None:
    return _guard(files, rng, "raise")


# --- capture API spellings


def _graph_withs(m: cst.Module) -> list[Ctx]:
    out = []
    for c in collect(m, lambda n: isinstance(n, cst.With) and len(n.items) == 1):
        item = c.node.items[0]  # type: ignore[attr-defined]
        call = item.item
        if (
            item.asname is None and isinstance(call, cst.Call) and get_full_name_for_node(call.func) == "torch.cuda.graph"
            and call.args and call.args[0].keyword is None and simple_ref(call.args[0].value)
            and all(a.keyword is None or a.keyword.value in {"pool", "capture_error_mode"} for a in call.args[1:])
        ):
            out.append(c)
    return out


@transform("capture_begin_end", "`with torch.cuda.graph(g):` spelled `g.capture_begin()` ... `g.capture_end()`")
def capture_begin_end(files: Files, rng: random.Random) -> Files | None:
    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        w = ctx.node
        assert isinstance(w, cst.With) and isinstance(w.body, cst.IndentedBlock)
        call = w.items[0].item
        assert isinstance(call, cst.Call)
        code = cst.Module(body=[]).code_for_node
        graph = code(call.args[0].value)
        rest = ", ".join(code(a).rstrip(", ") for a in call.args[1:])
        begin = stmt(f"{graph}.capture_begin({rest})\n").with_changes(leading_lines=w.leading_lines)
        header = w.body.header.comment
        if header is not None:
            begin = with_comment(begin, header.value)  # type: ignore[arg-type]
        body = list(w.body.body)
        return replace_nodes(m, {w: cst.FlattenSentinel([begin, *body, stmt(f"{graph}.capture_end()\n")])})  # type: ignore[return-value]

    return per_file(files, rng, _graph_withs, rewrite)


@transform("make_graphed_callables", "a capture of one call `y = f(x)` spelled `torch.cuda.make_graphed_callables(f, (x,))` then a call")
def make_graphed_callables(files: Files, rng: random.Random) -> Files | None:
    used = all_names(files)

    def find(m: cst.Module) -> list[Ctx]:
        out = []
        for c in _graph_withs(m):
            w = c.node
            assert isinstance(w, cst.With)
            graph = cst.Module(body=[]).code_for_node(w.items[0].item.args[0].value)  # type: ignore[attr-defined]
            body = w.body.body
            if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1 or not c.funcs:
                continue
            small = body[0].body[0]
            call = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
            if not isinstance(call, cst.Call) or not all(a.keyword is None and a.star == "" for a in call.args) or not call.args:
                continue
            # the graph object is used by nothing else: no replay, no return
            if "." in graph or _uses(c.funcs[-1], graph) != 2:
                continue
            out.append(c)
        return out

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        w = ctx.node
        assert isinstance(w, cst.With)
        line = w.body.body[0]
        assert isinstance(line, cst.SimpleStatementLine)
        small = line.body[0]
        call = small.value  # type: ignore[attr-defined]
        code = cst.Module(body=[]).code_for_node
        args = ", ".join(code(a.value) for a in call.args)
        graphed = fresh("graphed", used)
        make = stmt(f"{graphed} = torch.cuda.make_graphed_callables({code(call.func)}, ({args},))\n").with_changes(leading_lines=w.leading_lines)
        use = line.with_changes(body=[small.with_changes(value=call.with_changes(func=cst.Name(graphed)))], leading_lines=[])
        return replace_nodes(m, {w: cst.FlattenSentinel([make, use])})  # type: ignore[return-value]

    return per_file(files, rng, find, rewrite)


# --- annotations and decorators

PARAM_TYPES = (("stream", "torch.cuda.Stream"), ("event", "torch.cuda.Event"), ("ready", "torch.cuda.Event"), ("graph", "torch.cuda.CUDAGraph"))


@transform("drop_annotations", "remove the type annotations of every function (parameters, returns, annotated locals)")
def drop_annotations(files: Files, rng: random.Random) -> Files | None:
    options = [n for n in sorted(files) if re.search(r"def [^\n]*(:\s*[\w.\[\]| ]+[,)=]|->)", files[n])]
    if not options:
        return None
    name = rng.choice(options)

    class _T(cst.CSTTransformer):
        def __init__(self) -> None:
            self.depth = 0

        def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
            self.depth += 1

        def leave_FunctionDef(self, o: cst.FunctionDef, u: cst.FunctionDef) -> cst.FunctionDef:
            self.depth -= 1
            return u.with_changes(returns=None)

        def leave_Param(self, o: cst.Param, u: cst.Param) -> cst.Param:
            if u.annotation is None:
                return u
            return u.with_changes(annotation=None, equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")) if u.default else u.equal)

        def leave_AnnAssign(self, o: cst.AnnAssign, u: cst.AnnAssign) -> cst.BaseSmallStatement:  # type: ignore[override]
            if self.depth and u.value is not None:
                return cst.Assign(targets=[cst.AssignTarget(u.target)], value=u.value)
            return u

    new = parse(files[name]).visit(_T()).code
    return {**files, name: new} if new != files[name] else None


@transform("add_annotations", "annotate parameters named like streams/events/graphs and `-> None` returns")
def add_annotations(files: Files, rng: random.Random) -> Files | None:
    options = [n for n in _torch_files(files)]
    if not options:
        return None
    name = rng.choice(options)

    def returns_value(f: cst.FunctionDef) -> bool:
        return any(
            (isinstance(c.node, cst.Return) and c.node.value is not None and c.funcs[-1] is f) or (isinstance(c.node, (cst.Yield, cst.Await)))
            for c in collect(f, lambda n: isinstance(n, (cst.Return, cst.Yield, cst.Await)))
        )

    class _T(cst.CSTTransformer):
        def leave_Param(self, o: cst.Param, u: cst.Param) -> cst.Param:
            if u.annotation is not None:
                return u
            low = u.name.value.lower()
            kind = next((t for k, t in PARAM_TYPES if k in low), None)
            if kind is None:
                return u
            eq = cst.AssignEqual(cst.SimpleWhitespace(" "), cst.SimpleWhitespace(" ")) if u.default else u.equal
            return u.with_changes(annotation=cst.Annotation(expr(kind + (" | None" if isinstance(u.default, cst.Name) and u.default.value == "None" else ""))), equal=eq)

        def leave_FunctionDef(self, o: cst.FunctionDef, u: cst.FunctionDef) -> cst.FunctionDef:
            if u.returns is None and not returns_value(o):
                return u.with_changes(returns=cst.Annotation(cst.Name("None")))
            return u

    new = parse(files[name]).visit(_T()).code
    return {**files, name: new} if new != files[name] else None


def _functions(m: cst.Module) -> list[Ctx]:
    return [c for c in collect(m, lambda n: isinstance(n, cst.FunctionDef) and n.name.value != "__init__" and not n.decorators)]


def _decorate(files: Files, rng: random.Random, decorator: str) -> Files | None:
    def find(m: cst.Module) -> list[Ctx]:
        if not imports_torch(m):
            return []
        found = _functions(m)
        marked = [c for c in found if has_marker(c.node)]
        return marked or found

    def rewrite(m: cst.Module, ctx: Ctx, _: Files) -> cst.Module:
        func = ctx.node
        assert isinstance(func, cst.FunctionDef)
        new = func.with_changes(decorators=[cst.Decorator(expr(decorator))])
        return replace_nodes(m, {func: new})  # type: ignore[return-value]

    return per_file(files, rng, find, rewrite)


@transform("decorate_no_grad", "add `@torch.no_grad()` to a function or method (the one holding a marker when there is one)")
def decorate_no_grad(files: Files, rng: random.Random) -> Files | None:
    return _decorate(files, rng, "torch.no_grad()")


@transform("decorate_inference_mode", "add `@torch.inference_mode()` to a function or method")
def decorate_inference_mode(files: Files, rng: random.Random) -> Files | None:
    return _decorate(files, rng, "torch.inference_mode()")


@transform("drop_grad_decorators", "remove `@torch.no_grad()` / `@torch.inference_mode()` decorators")
def drop_grad_decorators(files: Files, rng: random.Random) -> Files | None:
    drop = {"torch.no_grad", "torch.inference_mode"}

    def name_of(d: cst.Decorator) -> str | None:
        return get_full_name_for_node(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)

    class _T(cst.CSTTransformer):
        def leave_FunctionDef(self, o: cst.FunctionDef, u: cst.FunctionDef) -> cst.FunctionDef:
            return u.with_changes(decorators=[d for d in u.decorators if name_of(d) not in drop])

    out = {n: parse(t).visit(_T()).code for n, t in files.items()}
    return out if out != files else None
