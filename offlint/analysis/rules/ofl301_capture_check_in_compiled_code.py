"""OFL301 capture-check-in-compiled-code: `torch.cuda.is_current_stream_capturing()` (or
`torch.compiler.is_compiling()` standing in for it) in code that torch.compile traces."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.facts import global_values
from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import ClassInfo, FunctionInfo
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.syntax import child_nodes
from offlint.analysis.torch_api import (
    CAPTURE_TESTS,
    COMPILE_DECORATORS,
    COMPILE_EXEMPT_DECORATORS,
    COMPILING_TESTS,
)


class CaptureCheckInCompiledCode(Rule):
    code = "OFL301"
    tokens = ("is_current_stream_capturing", "is_compiling")

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        roots = _compiled_roots(model)
        if not roots:
            return
        reached = _reach(model, roots)
        for fn in model.functions:
            root = reached.get(fn.qualname)
            if root is None:
                continue
            capture_named = _capture_named_locations(fn)
            for site in fn.calls:
                if site.callee in CAPTURE_TESTS or (
                    site.callee in COMPILING_TESTS and id(site.node) in capture_named
                ):
                    yield Finding(
                        site.node, {"call": code_of(site.node, model), "root": root}
                    )


def _decorator_name(model: ModuleModel, decorator: cst.BaseExpression) -> str | None:
    expr = decorator.func if isinstance(decorator, cst.Call) else decorator
    return model.qualname(expr)


def _is_exempt(model: ModuleModel, fn: FunctionInfo) -> bool:
    return any(
        _decorator_name(model, d.decorator) in COMPILE_EXEMPT_DECORATORS for d in fn.node.decorators
    )


def _classes_in(model: ModuleModel, value: cst.BaseExpression) -> list[ClassInfo]:
    """Same-module classes constructed anywhere in an expression (`Block()`,
    `nn.ModuleList([Block(i) for i in ...])`)."""
    by_name = {c.name: c for c in model.classes}
    found: list[ClassInfo] = []
    stack: list[cst.CSTNode] = [value]
    while stack:
        node = stack.pop()
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value in by_name
        ):
            found.append(by_name[node.func.value])
        stack.extend(child_nodes(node))
    return found


def _compiled_roots(model: ModuleModel) -> dict[str, str]:
    """qualname -> how it is compiled (`@torch.compile`, `torch.compile(Model())`)."""
    roots: dict[str, str] = {}
    for fn in model.functions:
        if any(
            _decorator_name(model, d.decorator) in COMPILE_DECORATORS for d in fn.node.decorators
        ):
            roots.setdefault(fn.qualname, f"@torch.compile {fn.qualname}")
    module_functions = model.module_functions

    def targets(arg: cst.BaseExpression, scope: FunctionInfo | None) -> list[FunctionInfo]:
        named = model._function_named(arg, scope) if scope is not None else None
        if named is not None:
            return [named]  # `self._step`, `functools.partial(Decoder._step, self)`, a factory's product
        if isinstance(arg, cst.Call):
            return [c.methods["forward"] for c in _classes_in(model, arg) if "forward" in c.methods]
        attr = self_attribute(arg)
        if attr is not None and scope is not None and scope.cls is not None:
            method = scope.cls.methods.get(attr)
            if method is not None:
                return [method]
            return _attr_forwards(model, scope.cls, attr)
        if isinstance(arg, cst.Name):
            if arg.value in module_functions:
                return [module_functions[arg.value]]
            bound = _assigned_values(model, scope, arg.value)
            return [
                c.methods["forward"]
                for v in bound
                for c in _classes_in(model, v)
                if "forward" in c.methods
            ]
        return []

    for scope, call in _compile_calls(model):
        if call.args:
            for target in targets(call.args[0].value, scope):
                roots.setdefault(
                    target.qualname, f"torch.compile({code_of(call.args[0].value, model)})"
                )
    return roots


def _compile_calls(model: ModuleModel) -> Iterator[tuple[FunctionInfo | None, cst.Call]]:
    for fn in model.functions:
        for site in fn.calls:
            if site.callee in COMPILE_DECORATORS:
                yield fn, site.node
    for stmt in model.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            stack: list[cst.CSTNode] = [stmt]
            while stack:
                node = stack.pop()
                if isinstance(node, cst.Call) and model.qualname(node.func) in COMPILE_DECORATORS:
                    yield None, node
                stack.extend(child_nodes(node))


def _assigned_values(
    model: ModuleModel, scope: FunctionInfo | None, name: str
) -> list[cst.BaseExpression]:
    values: list[cst.BaseExpression] = []
    if scope is not None:
        for assign in scope.assignments:
            if assign.value is not None and any(
                isinstance(t, cst.Name) and t.value == name for t in assign.targets
            ):
                values.append(assign.value)
        return values
    return global_values(model, name)


def _attr_forwards(model: ModuleModel, cls: ClassInfo, attr: str) -> list[FunctionInfo]:
    """`forward`s of same-module modules stored in `self.attr` (also in ModuleLists)."""
    out: list[FunctionInfo] = []
    for fn in model.functions:
        if not model.runs_on(fn, cls):
            continue
        for assign in fn.assignments:
            if assign.value is not None and any(self_attribute(t) == attr for t in assign.targets):
                out.extend(
                    c.methods["forward"]
                    for c in _classes_in(model, assign.value)
                    if "forward" in c.methods
                )
    return out


def _callees(model: ModuleModel, fn: FunctionInfo) -> list[FunctionInfo]:
    """Same-module functions `fn` calls: `f()`, nested `inner()`, `self.m()`, submodules
    `self.block(x)` / `self.blocks[i](x)` / `for b in self.blocks: b(x)`."""
    out: list[FunctionInfo] = []
    loop_vars: dict[str, str] = {}
    for node in _walk(fn.node.body):
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name):
            it = node.iter
            if (
                isinstance(it, cst.Call)
                and isinstance(it.func, cst.Name)
                and it.func.value == "enumerate"
                and it.args
            ):
                it = it.args[0].value
            attr = self_attribute(it)
            if attr is not None:
                loop_vars[node.target.value] = attr
    for site in fn.calls:
        func = site.node.func
        if isinstance(func, cst.Name):
            nested = [f for f in model.functions if f.parent is fn and f.name == func.value]
            if nested:
                out.extend(nested)
            elif func.value in model.module_functions:
                out.append(model.module_functions[func.value])
            elif func.value in loop_vars and fn.cls is not None:
                out.extend(_attr_forwards(model, fn.cls, loop_vars[func.value]))
            continue
        callee = func
        while isinstance(callee, cst.Subscript):
            callee = callee.value
        attr = self_attribute(callee)
        if attr is None or fn.cls is None:
            continue
        method = fn.cls.methods.get(attr)
        if method is not None and callee is func:
            out.append(method)
        else:
            out.extend(_attr_forwards(model, fn.cls, attr))
    return out


def _reach(model: ModuleModel, roots: dict[str, str]) -> dict[str, str]:
    by_name = {fn.qualname: fn for fn in model.functions}
    reached: dict[str, str] = {}
    work = [(by_name[q], how) for q, how in roots.items() if q in by_name]
    while work:
        fn, how = work.pop()
        if fn.qualname in reached or _is_exempt(model, fn):
            continue
        reached[fn.qualname] = how
        work.extend((callee, how) for callee in _callees(model, fn))
    return reached


def _capture_named_locations(fn: FunctionInfo) -> set[int]:
    """ids of calls whose result is used as a capture flag: assigned to a name mentioning
    capture, or returned by a function whose name mentions it."""
    ids: set[int] = set()
    for assign in fn.assignments:
        if isinstance(assign.value, cst.Call):
            for target in assign.targets:
                name = target.value if isinstance(target, cst.Name) else self_attribute(target)
                if name is not None and "captur" in name.lower():
                    ids.add(id(assign.value))
    if "captur" in fn.name.lower():
        for ret in fn.returns:
            if isinstance(ret.node.value, cst.Call):
                ids.add(id(ret.node.value))
    return ids


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in child_nodes(current):
            if not isinstance(child, cst.FunctionDef | cst.ClassDef | cst.Lambda):
                stack.append(child)
