"""Parameters an offloader parks in pageable host memory, and the copies that bring them back.

A class that offloads by moving each parameter's storage to the host (`param.data =
param.data.to(self.offload_device)`, `.cpu()`) leaves it in pageable memory: nothing pins what
`.to("cpu")` makes. When the same class later copies the parameters' own storage back to the
device (`param.data.to(self.onload_device, non_blocking=...)`, directly or through a helper it
hands `param.data` to), that copy reads pageable memory: PyTorch refuses it during a capture and
makes `non_blocking` synchronous outside one (diffusers' group offloading without a stream,
GROUND-TRUTH §3). A class that parks into pinned copies (`param.data = self.pinned[param]`) does
not count: its parks are not moves to the host.
"""

from __future__ import annotations

import libcst as cst

from offlint.analysis.facts import argument_for, is_parameter, values_assigned
from offlint.analysis.model import ModuleModel, own_nodes
from offlint.analysis.placement import names_host_device
from offlint.analysis.program import ClassInfo, FunctionInfo

# what iterating a module (or a group's list) over its tensors is spelled as
_TENSOR_LISTS = frozenset({"parameters", "buffers"})
_MAX_DEPTH = 4


def pageable_park(model: ModuleModel, cls: ClassInfo) -> FunctionInfo | None:
    """The method of `cls` that moves a parameter's storage to the host (`p.data = x.to(host)`,
    `p.data = x.cpu()`), if any (asked once per class)."""
    return model.remembered(("pageable park", id(cls)), lambda: _pageable_park(model, cls))


def _pageable_park(model: ModuleModel, cls: ClassInfo) -> FunctionInfo | None:
    for method in cls.methods.values():
        for assign in method.assignments:
            value = assign.value
            if not any(isinstance(t, cst.Attribute) and t.attr.value == "data" for t in assign.targets):
                continue
            if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
                continue
            moved = value.func.attr.value
            if moved == "cpu":
                return method
            if (
                moved == "to"
                and value.args
                and value.args[0].keyword is None
                and names_host_device(model, value.args[0].value, method)
            ):
                return method
    return None


def parameter_storage(model: ModuleModel, fn: FunctionInfo, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """`expr` may be a parameter's own storage: `p.data` or `p` for a `p` that iterates a
    module's `parameters()`/`buffers()` (or a group's `self.parameters` list), also through
    locals (either branch of `a if c else p.data`) and the helper parameters callers pass it to."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, cst.IfExp):
        return parameter_storage(model, fn, expr.body, depth + 1) or parameter_storage(model, fn, expr.orelse, depth + 1)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        expr = expr.value
    if not isinstance(expr, cst.Name):
        return False
    name = expr.value
    if _iterates_tensors(fn, name):
        return True
    if is_parameter(fn, name):
        return any(
            (arg := argument_for(site, fn, name)) is not None
            and parameter_storage(model, site.function, arg, depth + 1)
            for site in model.callers_of(fn)
        )
    return any(parameter_storage(model, fn, value, depth + 1) for value in values_assigned(model, fn, name))


def _iterates_tensors(fn: FunctionInfo, name: str) -> bool:
    """`for <name> in m.parameters():` / `for <name> in self.buffers:` in `fn`'s own body."""
    for node in own_nodes(fn.node.body):
        if not (isinstance(node, cst.For) and isinstance(node.target, cst.Name) and node.target.value == name):
            continue
        source = node.iter.func if isinstance(node.iter, cst.Call) else node.iter
        if isinstance(source, cst.Attribute) and source.attr.value in _TENSOR_LISTS:
            return True
    return False
