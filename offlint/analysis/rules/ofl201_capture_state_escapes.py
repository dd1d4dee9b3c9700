"""OFL201 capture-state-escapes: state made in a capturing branch and stored on `self` is
consumed on the eager path with nothing re-making or re-validating it.

Reported at the eager consumption (the `self.X` read), the place where the stale value is used
and where the fix goes; the message names the method whose capturing branch made it.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.capture_tags import capture_bookkeeping_tests
from offlint.analysis.facts import called_function
from offlint.analysis.kinds import Kind, self_attribute
from offlint.analysis.model import Context, ModuleModel
from offlint.analysis.module_moves import MoveTarget, module_moves
from offlint.analysis.program import Assignment, ClassInfo, FunctionInfo
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.syntax import child_nodes
from offlint.analysis.torch_api import (
    CAPTURE_TESTS,
    COMPILING_TESTS,
    EVENT_CONSTRUCTORS,
    GRAPH_CONSTRUCTORS,
    STREAM_CONSTRUCTORS,
)

_NOT_STATE = frozenset(
    {Kind.STREAM, Kind.EVENT, Kind.GRAPH, Kind.NOT_TORCH, Kind.PINNED_HOST, Kind.PAGEABLE_HOST, Kind.HOST_TENSOR}
)
_NOT_STATE_CALLS = (
    STREAM_CONSTRUCTORS | EVENT_CONSTRUCTORS | GRAPH_CONSTRUCTORS | CAPTURE_TESTS | COMPILING_TESTS
)
_HOST_BUILTINS = frozenset(
    {
        "len", "int", "float", "str", "bool", "id", "list", "set", "tuple", "max", "min", "sum", "range",
        "enumerate", "zip", "sorted", "getattr", "type", "isinstance", "hash", "repr", "object",
    }
)  # fmt: skip
_HOST_METHODS = frozenset({"record_event", "cpu", "tolist", "item"})
_METADATA_METHODS = frozenset(
    {"size", "dim", "numel", "stride", "data_ptr", "is_contiguous", "element_size"}
)


class CaptureStateEscapes(Rule):
    code = "OFL201"
    tokens = ("is_current_stream_capturing", "graph(", "capture_begin", "post_forward")

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        for move in module_moves(model):
            # `post_forward(module, out): module.to(storage_dtype)`: the module leaves a captured
            # forward holding parameters made in the capture, which only a replay writes
            if move.method == "post_forward" and move.target is not MoveTarget.HOST and move.site.hazardous:
                params = f"{code_of(move.site.receiver or move.site.node, model)}.parameters()"
                yield Finding(move.site.node, {"attr": params, "producer": move.method})
        for cls in model.classes:
            made = self._made_in_capture(model, cls)
            if not made:
                continue
            for fn in model.functions:
                if not model.runs_on(fn, cls) or capture_bookkeeping_tests(model, fn):
                    continue
                yield from self._eager_consumptions(model, fn, made)

    def _made_in_capture(self, model: ModuleModel, cls: ClassInfo) -> dict[str, Assignment]:
        """`self.X = <fresh device state>` in a branch that only runs while capturing."""
        made: dict[str, Assignment] = {}
        for fn in model.functions:
            if not model.runs_on(fn, cls):
                continue
            for assign in fn.assignments:
                if assign.context is not Context.CAPTURING or assign.value is None:
                    continue
                if not _makes_state(model, fn, assign.value):
                    continue
                for target in assign.targets:
                    attr = self_attribute(target)
                    if attr is not None:
                        made.setdefault(attr, assign)
        return made

    def _eager_consumptions(
        self, model: ModuleModel, fn: FunctionInfo, made: dict[str, Assignment]
    ) -> Iterator[Finding]:
        replay_orders = [c.order for c in fn.calls if c.method == "replay"]
        reported: set[int] = set()
        candidates: list[tuple[int, cst.BaseExpression]] = []
        for site in fn.calls:
            if site.context is not Context.EAGER or site.method in _METADATA_METHODS:
                continue
            exprs = [arg.value for arg in site.node.args]
            if site.receiver is not None:
                exprs.append(site.receiver)
            candidates.extend((site.order, e) for e in exprs)
        for ret in fn.returns:
            if ret.context is Context.EAGER and ret.node.value is not None:
                candidates.append((ret.order, ret.node.value))
        for assign in fn.assignments:
            if assign.context is Context.EAGER and assign.value is not None:
                candidates.append((assign.order, assign.value))
        for order, expr in sorted(candidates, key=lambda c: c[0]):
            if any(r < order for r in replay_orders):
                continue  # a replay wrote the captured outputs first
            for node, attr in _attribute_reads(expr):
                if attr not in made or id(node) in reported:
                    continue
                if _remade_before(model, fn, attr, order):
                    continue
                reported.add(id(node))
                producer = made[attr].function
                yield Finding(node, {"attr": f"self.{attr}", "producer": producer.name})


def _makes_state(model: ModuleModel, fn: FunctionInfo, value: cst.BaseExpression) -> bool:
    """A freshly computed value: something a call makes (tensors, dicts of tensors), not a
    stream/event/graph object, a host value or a flag."""
    if model.kind_of(value, fn).kind in _NOT_STATE:
        return False
    if isinstance(value, cst.Call):
        q = model.qualname(value.func)
        if q in _NOT_STATE_CALLS:
            return False
        if isinstance(value.func, cst.Name) and value.func.value in _HOST_BUILTINS:
            return False
        return not (
            isinstance(value.func, cst.Attribute) and value.func.attr.value in _HOST_METHODS
        )
    return isinstance(value, cst.DictComp | cst.ListComp | cst.BinaryOperation)


def _attribute_reads(expr: cst.BaseExpression) -> Iterator[tuple[cst.Attribute, str]]:
    """`self.X` nodes read as data in an expression (not in comparisons such as `is None`)."""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Comparison | cst.Lambda | cst.UnaryOperation):
            continue
        if isinstance(node, cst.Attribute):
            attr = self_attribute(node)
            if attr is not None:
                yield node, attr
                continue
        stack.extend(reversed(child_nodes(node)))


def _remade_before(model: ModuleModel, fn: FunctionInfo, attr: str, order: int) -> bool:
    """An assignment to `self.attr` on the way (outside capturing branches), directly or by a
    `self.m()` call that makes it."""
    for assign in fn.assignments:
        if (
            assign.order < order
            and assign.context is not Context.CAPTURING
            and _assigns(assign, attr)
        ):
            return True
    for site in fn.calls:
        if site.order < order and site.context is not Context.CAPTURING:
            target = called_function(model, site)
            if target is not None and _makes_eagerly(model, target, attr, {fn.qualname}):
                return True
    return False


def _makes_eagerly(model: ModuleModel, fn: FunctionInfo, attr: str, visited: set[str]) -> bool:
    if fn.qualname in visited:
        return False
    visited.add(fn.qualname)
    if any(a.context is not Context.CAPTURING and _assigns(a, attr) for a in fn.assignments):
        return True
    for site in fn.calls:
        if site.context is Context.CAPTURING:
            continue
        target = called_function(model, site)
        if target is not None and _makes_eagerly(model, target, attr, visited):
            return True
    return False


def _assigns(assign: Assignment, attr: str) -> bool:
    return any(self_attribute(t) == attr for t in assign.targets)
