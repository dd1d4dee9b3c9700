"""OFL205 unsynchronized-side-stream-result: the current stream reads a tensor produced under
`with torch.cuda.stream(side)` with no stream/event wait in between (an eager data race)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from offlint.analysis.facts import called_function
from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import Kind
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import CallSite, FunctionInfo, StreamScope
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.streams import switches_stream
from offlint.analysis.syntax import child_nodes
from offlint.analysis.torch_api import (
    ALLOCATORS,
    CAPTURE_TESTS,
    CURRENT_STREAM,
    DEVICE_SYNCS,
    EVENT_CONSTRUCTORS,
    STREAM_CONSTRUCTORS,
)

# calls that make the current stream (or the host) wait for other streams
_WAIT_METHODS = frozenset({"wait_stream", "wait_event", "wait", "synchronize"})
# uses of a tensor that read no device data
_METADATA_METHODS = frozenset(
    {
        "record_stream",
        "size",
        "dim",
        "numel",
        "stride",
        "data_ptr",
        "element_size",
        "is_contiguous",
        "untyped_storage",
        "storage_offset",
        "get_device",
        "nbytes",
        # views: they read no data either
        "narrow",
        "view",
        "view_as",
        "as_strided",
        "unsqueeze",
        "squeeze",
        "transpose",
        "permute",
        "expand",
        "split",
        "chunk",
        "unbind",
        "detach",
    }
)
# results that live on the host (or are not tensors): no stream can race on them
_NOT_DATA_METHODS = frozenset(
    {"record_event", "pin_memory", "cpu", "tolist", "item", "numpy", "size", "numel", "dim"}
)
_HOST_BUILTINS = frozenset({"len", "int", "float", "bool", "str", "list", "tuple", "dict", "range"})
_NON_READING_FUNCTIONS = frozenset(
    {"isinstance", "len", "id", "type", "hasattr", "getattr", "setattr"}
)
_NOT_DATA = frozenset(
    {Kind.STREAM, Kind.EVENT, Kind.GRAPH, Kind.NOT_TORCH, Kind.PINNED_HOST, Kind.PAGEABLE_HOST, Kind.HOST_TENSOR}
)


@dataclass(frozen=True)
class _Produced:
    key: str  # `t` or `self.buf`
    scope: StreamScope
    order: int


class UnsynchronizedSideStreamResult(Rule):
    code = "OFL205"
    tokens = ("stream(",)

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        for fn in model.functions:
            if not fn.stream_withs:
                continue
            for produced in self._produced(model, fn):
                use = self._first_unsynchronized_use(model, fn, produced)
                if use is not None:
                    yield Finding(
                        use,
                        {
                            "tensor": produced.key,
                            "stream": code_of(produced.scope.stream, model),
                        },
                    )

    # ------------------------------------------------------------ producers
    def _produced(self, model: ModuleModel, fn: FunctionInfo) -> Iterator[_Produced]:
        seen: set[tuple[str, int]] = set()
        for assign in fn.assignments:
            scope = _side_scope(model, fn, assign.stream_scopes)
            if scope is None or assign.value is None or not _makes_data(model, fn, assign.value):
                continue
            for target in assign.targets:
                key = _key(target)
                if key is not None and (key, id(scope)) not in seen:
                    seen.add((key, id(scope)))
                    yield _Produced(key, scope, assign.order)
        for site in fn.calls:
            if site.method != "copy_" or site.receiver is None:
                continue
            scope = _side_scope(model, fn, site.stream_scopes)
            key = _key(site.receiver)
            if model.kind_of(site.receiver, fn).kind in _NOT_DATA:
                continue  # device-to-host: the host, not the current stream, reads it
            if scope is not None and key is not None and (key, id(scope)) not in seen:
                seen.add((key, id(scope)))
                yield _Produced(key, scope, site.order)

    # ------------------------------------------------------------ consumers
    def _first_unsynchronized_use(
        self, model: ModuleModel, fn: FunctionInfo, produced: _Produced
    ) -> cst.CSTNode | None:
        # (order, tie-break, what, node): a use in `t = t + 1` comes before its rebinding
        events: list[tuple[int, int, str, cst.CSTNode | None]] = []
        handoff_events = _events_recorded_after(model, fn, produced)
        for site in fn.calls:
            if site.order <= produced.order:
                continue
            if _is_host_sync(site):
                events.append((site.order, 0, "sync", None))  # blocks the host: all is done
                continue
            if produced.scope in site.stream_scopes:
                continue
            if site.stream_scopes:
                continue  # runs on another explicitly chosen stream: not the current one
            if _exclusive(site.guards, produced.scope.guards):
                continue  # `if s: with stream(s): copy` ... `else: copy`: never both
            if _is_wait(model, site, set()):
                events.append((site.order, 0, "sync", None))
                continue
            if _call_reads(site, produced.key):
                if any(_key(arg.value) in handoff_events for arg in site.node.args):
                    continue  # handed over together with an event recorded after it
                events.append((site.order, 0, "use", site.node))
        for assign in fn.assignments:
            if (
                assign.order <= produced.order
                or produced.scope in assign.stream_scopes
                or assign.stream_scopes
            ):
                continue
            if assign.value is not None:
                operand = _binary_operand(assign.value, produced.key)
                if operand is not None:
                    events.append((assign.order, 0, "use", operand))
            if any(_key(t) == produced.key for t in assign.targets):
                events.append((assign.order, 1, "rebind", None))
        for ret in fn.returns:
            if ret.order <= produced.order or ret.node.value is None:
                continue
            if _inside(ret.node, produced.scope.node):
                continue
            operand = _binary_operand(ret.node.value, produced.key)
            if operand is not None:
                events.append((ret.order, 0, "use", operand))
        for _, _, what, node in sorted(events, key=lambda e: (e[0], e[1])):
            if what == "use":
                return node
            return None  # synchronised first, or rebound to another tensor
        return None


def _exclusive(
    guards: tuple[tuple[cst.BaseExpression, bool], ...], others: tuple[tuple[cst.BaseExpression, bool], ...]
) -> bool:
    """Two places on opposite branches of one `if` (the same test, taken both ways): they never
    run in the same call."""
    return any(test is other and taken != other_taken for test, taken in guards for other, other_taken in others)


def _key(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    name = dotted_name(expr)
    if name is not None and name.startswith("self.") and name.count(".") == 1:
        return name
    return None


def _side_scope(
    model: ModuleModel, fn: FunctionInfo, scopes: tuple[StreamScope, ...]
) -> StreamScope | None:
    """The innermost scope when it really switches to another stream."""
    if not scopes:
        return None
    scope = scopes[-1]
    stream = scope.stream
    if not switches_stream(model, scope):
        return None
    if isinstance(stream, cst.Name):
        for assign in fn.assignments:
            if (
                any(isinstance(t, cst.Name) and t.value == stream.value for t in assign.targets)
                and isinstance(assign.value, cst.Call)
                and model.qualname(assign.value.func) in CURRENT_STREAM
            ):
                return None
    return scope


def _makes_data(model: ModuleModel, fn: FunctionInfo, value: cst.BaseExpression) -> bool:
    """A value computed by device work: a call that is not a pure allocation, a stream/event
    constructor or a capture test, and not known to be a host or non-torch object."""
    if model.kind_of(value, fn).kind in _NOT_DATA:
        return False
    if isinstance(value, cst.Call):
        q = model.qualname(value.func)
        if (
            q in ALLOCATORS
            or q in STREAM_CONSTRUCTORS
            or q in EVENT_CONSTRUCTORS
            or q in CAPTURE_TESTS
        ):
            return False
        if isinstance(value.func, cst.Name) and value.func.value in _HOST_BUILTINS:
            return False
        return not (
            isinstance(value.func, cst.Attribute) and value.func.attr.value in _NOT_DATA_METHODS
        )
    if isinstance(value, cst.BinaryOperation):
        # `packed.float() * scale`: arithmetic with an operand device work made; arithmetic on
        # names of unknown kind alone is as often host ints as tensors
        return any(
            isinstance(side, cst.Call | cst.BinaryOperation) and _makes_data(model, fn, side)
            for side in (value.left, value.right)
        )
    return False


def _is_host_sync(site: CallSite) -> bool:
    return site.callee in DEVICE_SYNCS or site.method == "synchronize"


def _events_recorded_after(model: ModuleModel, fn: FunctionInfo, produced: _Produced) -> set[str]:
    """Names of events recorded (`ev.record()`) after the tensor was produced, or bound after it to
    an event a call records (`ev = s.record_event()`, `ev = record_ready(s)`: flashinfer's plans)."""
    names: set[str] = set()
    for site in fn.calls:
        if site.order <= produced.order:
            continue
        if site.method == "record" and site.receiver is not None:
            key = _key(site.receiver)
            if key is not None:
                names.add(key)
        elif _returns_recorded_event(model, site):
            for assign in fn.assignments:
                if assign.value is site.node:
                    names.update(key for key in map(_key, assign.targets) if key is not None)
    return names


def _returns_recorded_event(model: ModuleModel, site: CallSite) -> bool:
    """`s.record_event()`, or a call of this module's function that records the event it returns."""
    if site.method == "record_event":
        return True
    if model.kind_of(site.node, site.function).kind is not Kind.EVENT:
        return False
    target = called_function(model, site)
    return target is not None and any(inner.method in ("record", "record_event") for inner in target.calls)


def _is_wait(model: ModuleModel, site: CallSite, visited: set[str]) -> bool:
    if site.callee in DEVICE_SYNCS or site.method in _WAIT_METHODS:
        return True
    target = called_function(model, site)
    if target is None or target.qualname in visited:
        return False
    visited.add(target.qualname)
    return any(_is_wait(model, inner, visited) for inner in target.calls if not inner.stream_scopes)


def _matches(expr: cst.BaseExpression, key: str) -> bool:
    node = expr
    while isinstance(node, cst.Subscript):
        node = node.value
    return _key(node) == key


def _call_reads(site: CallSite, key: str) -> bool:
    func = site.node.func
    if isinstance(func, cst.Name) and func.value in _NON_READING_FUNCTIONS:
        return False
    if site.method in _METADATA_METHODS or site.method in _WAIT_METHODS:
        return False
    if site.receiver is not None and _matches(site.receiver, key):
        return True
    return any(
        _matches(arg.value, key)
        for arg in site.node.args
        if arg.keyword is None or arg.keyword.value != "out"
    )


def _binary_operand(expr: cst.BaseExpression, key: str) -> cst.CSTNode | None:
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Lambda | cst.Call):
            continue  # calls are judged as call sites
        if isinstance(node, cst.BinaryOperation):
            for side in (node.left, node.right):
                if _matches(side, key):
                    return side
        stack.extend(child_nodes(node))
    return None


def _inside(node: cst.CSTNode, container: cst.CSTNode) -> bool:
    stack: list[cst.CSTNode] = [container]
    while stack:
        current = stack.pop()
        if current is node:
            return True
        stack.extend(child_nodes(current))
    return False
