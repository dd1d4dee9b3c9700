"""Questions several rules ask of the model (kept here so no rule answers them twice)."""

from __future__ import annotations

import libcst as cst

from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import Kind, Typed, self_attribute
from offlint.analysis.model import CallSite, FunctionInfo, ModuleModel


def receiver_kind(model: ModuleModel, site: CallSite) -> Typed:
    if site.receiver is None:
        return Typed(Kind.UNKNOWN)
    return model.kind_of(site.receiver, site.function)


def is_event(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> bool:
    """A torch CUDA event: known by construction/annotation, or - last resort - by its name in
    an offloader-style class (documented as a guess in the rules that use it)."""
    typed = model.kind_of(expr, fn)
    if typed.kind is not Kind.EVENT:
        return False
    return not typed.guessed or (fn.cls is not None and fn.cls.offloader_style)


def is_stream(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> bool:
    typed = model.kind_of(expr, fn)
    return typed.kind is Kind.STREAM


def mentions_capture_tag(expr: cst.BaseExpression) -> bool:
    """A test that looks at capture bookkeeping (`self._captured_in`, `capture_id == ...`,
    `self._ready_before_capture`): the author tracks where the event was recorded."""
    for node in _walk(expr):
        name = dotted_name(node) if isinstance(node, cst.Name | cst.Attribute) else None
        if name is not None and "captur" in name.lower():
            return True
    return False


def guarded_by_capture_tag(site: CallSite) -> bool:
    return any(mentions_capture_tag(test) for test, _ in site.guards)


def storage_of(expr: cst.BaseExpression) -> str | None:
    """Where an event/stream expression lives beyond one call: `self.x` (also `self.x[i]`) or
    a module global; None for a plain local."""
    node = expr
    while isinstance(node, cst.Subscript):
        node = node.value
    attr = self_attribute(node)
    if attr is not None:
        return f"self.{attr}"
    if isinstance(node, cst.Attribute):
        return dotted_name(node)
    return None


def local_name(expr: cst.BaseExpression) -> str | None:
    node = expr
    while isinstance(node, cst.Subscript):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def recorded_locally_before(site: CallSite, name: str) -> bool:
    """`ev = torch.cuda.Event(); ev.record(); ... ev.wait()` in one call: the record happens in
    the same capture as the wait, so the wait is legal."""
    fn = site.function
    fresh = any(
        isinstance(a.value, cst.Call)
        and any(isinstance(t, cst.Name) and t.value == name for t in a.targets)
        and a.order < site.order
        for a in fn.assignments
    )
    recorded = any(
        c.method in ("record", "record_event")
        and c.order < site.order
        and (
            (c.receiver is not None and local_name(c.receiver) == name)
            or any(isinstance(t, cst.Name) and t.value == name for a in fn.assignments for t in a.targets if a.value is c.node)
        )
        for c in fn.calls
    )
    return fresh and recorded


def is_parameter(fn: FunctionInfo, name: str) -> bool:
    params = fn.node.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return any(p.name.value == name for p in every)


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.children)
    return out
