"""Find the prefetch/wait offloader shape, by what the code does rather than by method names.

The shape (SGLang's `_ModuleOffloader`, and most layer offloaders written like it):

- a *producer* method forks a side stream and, under `with torch.cuda.stream(side):`, stores
  freshly copied device tensors on `self.T` and records an event kept on `self.E`;
- a *consumer* method of the same class waits on `self.E` and returns `self.T`;
- usually an *offload* method that drops them (`self.T = None`);
- a *prefetch-ahead* hook somewhere in the module calling `seq[(i + k) % len(seq)].producer()`
  (the wrap-around: the last layers prefetch the first ones for the next forward);
- usually a *priming loop* in the owner (`for i in range(k): self.offloaders[i].producer()`,
  e.g. in `post_init`) and an owner method that builds the offloaders and returns the modules.

A shape is *hazardous* when the consumer's wait may run under capture on an event recorded in
another call (OFL101), or when a capturing branch keeps tensors made inside the capture on
`self` where eager code reads them (OFL201, the merged upstream fix). Capture-aware versions
(a wait protected by a capture tag, or reached only eagerly, with nothing escaping) are left
alone - this is what makes `offlint fix` idempotent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from offlint.analysis.capture_tags import guarded_by_capture_tag, guarded_by_validity_flag
from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import CallSite, ClassInfo, Context, FunctionInfo, ModuleModel
from offlint.analysis.syntax import walk
from offlint.analysis.torch_api import CAPTURE_TESTS


@dataclass(eq=False)
class WrapAroundPrefetch:
    """`seq[(ahead) % bound].producer()` as the only statement on its line."""

    line: cst.SimpleStatementLine
    sequence: cst.BaseExpression
    ahead: cst.BaseExpression
    bound: cst.BaseExpression
    function: FunctionInfo
    producer_name: str  # the method called


@dataclass(eq=False)
class PrimingLoop:
    """`for i in range(k): seq[i].producer()` (or `for o in seq[:k]: o.producer()`) in an owner
    method: prefetches issued before the first forward, i.e. outside any capture."""

    loop: cst.For
    method: FunctionInfo
    owner: ClassInfo
    sequence_text: str  # `self.offloaders`


@dataclass(eq=False)
class ModulesReturn:
    """`return all_modules` in the owner method that builds the offloaders: the forward-start
    hook goes on the first of these modules."""

    method: FunctionInfo
    line: cst.SimpleStatementLine
    modules: str


@dataclass(eq=False)
class OffloaderShape:
    cls: ClassInfo
    producer: FunctionInfo
    consumer: FunctionInfo
    offload: FunctionInfo | None
    init: FunctionInfo | None
    tensors_attr: str
    event_attr: str
    fork_with: cst.With  # the top-level `with torch.cuda.stream(side):` statement of the producer
    produce_value: cst.BaseExpression  # what the producer stores on self.T
    wait_call: cst.Call
    wait_statement: cst.BaseStatement  # top-level statement of the consumer holding the wait
    producer_capture_branches: list[cst.If] = field(default_factory=list)
    consumer_capture_branches: list[cst.If] = field(default_factory=list)
    event_init: cst.SimpleStatementLine | None = None  # `self.E = None` in __init__
    tensor_asserts: list[cst.SimpleStatementLine] = field(default_factory=list)
    wrap_arounds: list[WrapAroundPrefetch] = field(default_factory=list)
    primers: list[PrimingLoop] = field(default_factory=list)
    modules_return: ModulesReturn | None = None
    hazards: list[tuple[str, str]] = field(default_factory=list)  # (rule code, why)

    @property
    def tag_attr(self) -> str:
        """`self.<E>_captured`: whether the event was recorded while capturing."""
        return f"{self.event_attr}_captured"

    @property
    def pending_attr(self) -> str:
        """`self.<E>_pending` (compile-safe overlap): a copy issued by this forward waits for
        the consumer, which takes it."""
        wanted = f"{self.event_attr}_pending"
        if wanted not in self.cls.attrs and wanted not in self.cls.methods:
            return wanted
        return f"_offlint{wanted if wanted.startswith('_') else '_' + wanted}"


def top_level_statements(fn: FunctionInfo) -> list[cst.BaseStatement]:
    body = fn.node.body
    return list(body.body) if isinstance(body, cst.IndentedBlock) else []


def contains(root: cst.CSTNode, target: cst.CSTNode) -> bool:
    stack = [root]
    while stack:
        node = stack.pop()
        if node is target:
            return True
        stack.extend(node.children)
    return False


def is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def capture_branches(model: ModuleModel, fn: FunctionInfo) -> list[cst.If]:
    """Top-level `if <capturing>: ...; return` statements: an earlier capture-aware fix."""
    found = []
    for stmt in top_level_statements(fn):
        if (
            isinstance(stmt, cst.If)
            and stmt.orelse is None
            and model.capture_condition(stmt.test, fn) is Context.CAPTURING
            and _ends_with_return(stmt.body)
        ):
            found.append(stmt)
    return found


def _ends_with_return(block: cst.BaseSuite) -> bool:
    if isinstance(block, cst.IndentedBlock) and block.body:
        last = block.body[-1]
        return isinstance(last, cst.SimpleStatementLine) and any(
            isinstance(s, cst.Return) for s in last.body
        )
    return False


def _stores_made_value(branch: cst.If, attr: str) -> bool:
    """The branch assigns something other than None to `self.<attr>`."""
    for node in walk(branch):
        if (
            isinstance(node, cst.Assign)
            and any(self_attribute(t.target) == attr for t in node.targets)
            and not (isinstance(node.value, cst.Name) and node.value.value == "None")
        ):
            return True
    return False


def _producer_parts(
    model: ModuleModel, fn: FunctionInfo
) -> tuple[str, str, cst.With, cst.BaseExpression] | None:
    """(tensors attr, event attr, fork `with`, stored value) when `fn` is a producer."""
    if not fn.is_method or not fn.stream_withs:
        return None
    event_attr = None
    for site in fn.calls:
        if site.method == "record" and site.stream_scopes and site.receiver is not None:
            event_attr = self_attribute(site.receiver)
            if event_attr is not None:
                break
    if event_attr is None:
        return None
    for assign in fn.assignments:
        if not assign.stream_scopes or assign.value is None:
            continue
        for target in assign.targets:
            attr = self_attribute(target)
            if attr is None or attr == event_attr:
                continue
            if (
                isinstance(assign.value, cst.Call)
                and model.qualname(assign.value.func) == "torch.cuda.Event"
            ):
                continue
            with_stmt = assign.stream_scopes[0].node
            if isinstance(with_stmt, cst.With) and any(stmt is with_stmt for stmt in top_level_statements(fn)):
                return attr, event_attr, with_stmt, assign.value
    return None


def _waited_event(site: CallSite) -> str | None:
    """`E` when the call is `self.E.wait()` or `stream.wait_event(self.E)`."""
    if site.method == "wait" and site.receiver is not None:
        return self_attribute(site.receiver)
    if site.method == "wait_event" and site.node.args:
        return self_attribute(site.node.args[0].value)
    return None


def _returns_attr(fn: FunctionInfo, attr: str) -> bool:
    return any(
        r.node.value is not None and self_attribute(r.node.value) == attr for r in fn.returns
    )


class _ProducerCalls:
    """The wrap-around prefetches and priming loops of the module, by the method they call: one
    scan of the module for all its shapes (a scan per shape was quadratic in a class of many
    producers)."""

    def __init__(self, model: ModuleModel) -> None:
        self.model = model
        self._wrap_arounds: dict[str, list[WrapAroundPrefetch]] | None = None
        self._primers: dict[str, list[PrimingLoop]] | None = None

    def wrap_arounds(self, producer_name: str) -> list[WrapAroundPrefetch]:
        if self._wrap_arounds is None:
            self._wrap_arounds = {}
            for found in _wrap_arounds(self.model):
                self._wrap_arounds.setdefault(found.producer_name, []).append(found)
        return list(self._wrap_arounds.get(producer_name, ()))

    def primers(self, producer_name: str) -> list[PrimingLoop]:
        if self._primers is None:
            self._primers = {}
            for name, found in _priming_loops(self.model):
                self._primers.setdefault(name, []).append(found)
        return list(self._primers.get(producer_name, ()))


class _ClassIndex:
    """Which methods of a class wait on each `self.<event>`, and which set each `self.<attr>` to
    None, found in one pass over the class: asking each method per producer was quadratic."""

    def __init__(self, cls: ClassInfo) -> None:
        self.waiters: dict[str, list[tuple[FunctionInfo, CallSite]]] = {}
        self.clearers: dict[str, list[FunctionInfo]] = {}
        # `self.<attr> = ...` lines at the top level of __init__ (the last one for each attr)
        self.set_in_init: dict[str, cst.SimpleStatementLine] = {}
        init = cls.methods.get("__init__")
        for stmt in top_level_statements(init) if init is not None else ():
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign | cst.AnnAssign):
                        for target in _targets(small):
                            attr = self_attribute(target)
                            if attr is not None:
                                self.set_in_init[attr] = stmt
        for method in cls.methods.values():
            last: dict[str, CallSite] = {}  # the last wait on each event is the one kept
            for site in method.calls:
                event = _waited_event(site)
                if event is not None:
                    last[event] = site
            for event, site in last.items():
                self.waiters.setdefault(event, []).append((method, site))
            cleared: set[str] = set()
            for assign in method.assignments:
                if isinstance(assign.value, cst.Name) and assign.value.value == "None":
                    for target in assign.targets:
                        attr = self_attribute(target)
                        if attr is not None and attr not in cleared:
                            cleared.add(attr)
                            self.clearers.setdefault(attr, []).append(method)


def find_shapes(model: ModuleModel) -> list[OffloaderShape]:
    shapes = []
    calls = _ProducerCalls(model)
    for cls in model.classes:
        index: _ClassIndex | None = None
        for producer in list(cls.methods.values()):
            parts = _producer_parts(model, producer)
            if parts is None:
                continue
            tensors_attr, event_attr, fork_with, value = parts
            index = index or _ClassIndex(cls)
            for consumer, wait in index.waiters.get(event_attr, ()):
                if consumer is producer or not _returns_attr(consumer, tensors_attr):
                    continue
                shape = _build(
                    model, cls, producer, consumer, tensors_attr, event_attr, fork_with, value, wait, calls, index
                )
                if shape is not None:
                    shapes.append(shape)
                break
    return shapes


def _build(
    model: ModuleModel,
    cls: ClassInfo,
    producer: FunctionInfo,
    consumer: FunctionInfo,
    tensors_attr: str,
    event_attr: str,
    fork_with: cst.With,
    value: cst.BaseExpression,
    wait: CallSite,
    calls: _ProducerCalls,
    index: _ClassIndex,
) -> OffloaderShape | None:
    consumer_branches = capture_branches(model, consumer)
    wait_statement = next(
        (
            s
            for s in top_level_statements(consumer)
            if contains(s, wait.node) and not any(s is b for b in consumer_branches)
        ),
        None,
    )
    if wait_statement is None:
        return None
    offload = next(
        (
            m
            for m in index.clearers.get(tensors_attr, ())
            if m is not producer and m is not consumer and m.name != "__init__"
        ),
        None,
    )
    init = cls.methods.get("__init__")
    event_init = index.set_in_init.get(event_attr)
    asserts = []
    for stmt in top_level_statements(consumer):
        if stmt is wait_statement:
            break
        if (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Assert)
            and _mentions_attr(stmt.body[0].test, tensors_attr)
        ):
            asserts.append(stmt)
    shape = OffloaderShape(
        cls=cls,
        producer=producer,
        consumer=consumer,
        offload=offload,
        init=init,
        tensors_attr=tensors_attr,
        event_attr=event_attr,
        fork_with=fork_with,
        produce_value=value,
        wait_call=wait.node,
        wait_statement=wait_statement,
        producer_capture_branches=capture_branches(model, producer),
        consumer_capture_branches=consumer_branches,
        event_init=event_init,
        tensor_asserts=asserts,
    )
    shape.wrap_arounds = calls.wrap_arounds(producer.name)
    shape.primers = calls.primers(producer.name)
    if shape.primers:
        shape.modules_return = _modules_return(shape.primers[0])
    shape.hazards = _hazards(model, shape, wait)
    return shape


def _targets(small: cst.BaseSmallStatement) -> list[cst.BaseExpression]:
    if isinstance(small, cst.Assign):
        return [t.target for t in small.targets]
    if isinstance(small, cst.AnnAssign):
        return [small.target]
    return []


def _mentions_attr(expr: cst.CSTNode, attr: str) -> bool:
    return any(isinstance(n, cst.Attribute) and self_attribute(n) == attr for n in walk(expr))


def _hazards(model: ModuleModel, shape: OffloaderShape, wait: CallSite) -> list[tuple[str, str]]:
    found = []
    event = wait.receiver if wait.method == "wait" else wait.node.args[0].value
    # a capture tag, or (compile-safe) a pending flag only the producer sets and the wait takes
    vouched = guarded_by_capture_tag(wait) or (
        event is not None and guarded_by_validity_flag(model, wait, event)
    )
    if wait.context.may_capture and not vouched:
        found.append(
            ("OFL101", "the consumer waits, under capture, on an event recorded in another call")
        )
    for branch in shape.producer_capture_branches + shape.consumer_capture_branches:
        if _stores_made_value(branch, shape.tensors_attr):
            found.append(
                ("OFL201", "a capturing branch keeps tensors made inside the capture on self")
            )
            break
    return found


def _wrap_arounds(model: ModuleModel) -> Iterator[WrapAroundPrefetch]:
    for fn in model.functions:
        for stmt in _own_simple_lines(fn.node.body):
            if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
                continue
            call = stmt.body[0].value
            if not (
                isinstance(call, cst.Call)
                and not call.args
                and isinstance(call.func, cst.Attribute)
                and isinstance(call.func.value, cst.Subscript)
                and len(call.func.value.slice) == 1
            ):
                continue
            index = call.func.value.slice[0].slice
            if not isinstance(index, cst.Index):
                continue
            modulo = index.value
            if isinstance(modulo, cst.BinaryOperation) and isinstance(modulo.operator, cst.Modulo):
                yield WrapAroundPrefetch(
                    line=stmt,
                    sequence=call.func.value.value,
                    ahead=modulo.left,
                    bound=modulo.right,
                    function=fn,
                    producer_name=call.func.attr.value,
                )


def _own_simple_lines(body: cst.BaseSuite) -> Iterator[cst.SimpleStatementLine]:
    """Simple statement lines of a body, not descending into nested defs or classes."""
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            yield node
            continue
        for child in reversed(node.children):
            if isinstance(child, cst.FunctionDef | cst.ClassDef | cst.Lambda):
                continue
            stack.append(child)


def _priming_loops(model: ModuleModel) -> Iterator[tuple[str, PrimingLoop]]:
    """Each priming loop, with the name of the method it calls."""
    for fn in model.functions:
        if not fn.is_method or fn.cls is None:
            continue
        for stmt in top_level_statements(fn):
            if not isinstance(stmt, cst.For) or not isinstance(stmt.target, cst.Name):
                continue
            body = stmt.body
            if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
                continue
            only = body.body[0]
            if not (
                isinstance(only, cst.SimpleStatementLine)
                and len(only.body) == 1
                and isinstance(only.body[0], cst.Expr)
                and isinstance(only.body[0].value, cst.Call)
            ):
                continue
            call = only.body[0].value
            if not isinstance(call.func, cst.Attribute):
                continue
            receiver = call.func.value
            variable = stmt.target.value
            sequence: cst.BaseExpression | None = None
            if (
                isinstance(receiver, cst.Subscript)
                and len(receiver.slice) == 1
                and isinstance(receiver.slice[0].slice, cst.Index)
                and isinstance(receiver.slice[0].slice.value, cst.Name)
                and receiver.slice[0].slice.value.value == variable
                and isinstance(stmt.iter, cst.Call)
                and isinstance(stmt.iter.func, cst.Name)
                and stmt.iter.func.value == "range"
            ):
                sequence = receiver.value
            elif (
                isinstance(receiver, cst.Name)
                and receiver.value == variable
                and isinstance(stmt.iter, cst.Subscript)
            ):
                sequence = stmt.iter.value
            if sequence is None or self_attribute(sequence) is None:
                continue
            yield call.func.attr.value, PrimingLoop(
                loop=stmt,
                method=fn,
                owner=fn.cls,
                sequence_text=model.module.code_for_node(sequence),
            )


def _modules_return(primer: PrimingLoop) -> ModulesReturn | None:
    """The owner method that fills `self.offloaders` and returns a list of modules."""
    sequence_attr = primer.sequence_text.removeprefix("self.")
    for method in primer.owner.methods.values():
        fills = any(
            site.method in ("append", "extend")
            and site.receiver is not None
            and self_attribute(site.receiver) == sequence_attr
            for site in method.calls
        )
        if not fills:
            continue
        statements = top_level_statements(method)
        if not statements:
            continue
        last = statements[-1]
        if (
            isinstance(last, cst.SimpleStatementLine)
            and len(last.body) == 1
            and isinstance(last.body[0], cst.Return)
            and isinstance(last.body[0].value, cst.Name)
        ):
            return ModulesReturn(method=method, line=last, modules=last.body[0].value.value)
    return None


def is_capture_test_call(model: ModuleModel, node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and model.qualname(node.func) in CAPTURE_TESTS
