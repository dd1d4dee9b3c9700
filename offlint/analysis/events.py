"""Facts about CUDA events: how one was made (`external=True` events are legal across captures)
and whether the caller hands it in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import libcst as cst

from offlint.analysis.facts import global_values, is_parameter
from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import CallSite, ClassInfo, FunctionInfo
from offlint.analysis.syntax import call_argument, name_of, unsubscripted, walk, with_value
from offlint.analysis.torch_api import EVENT_CONSTRUCTORS


def is_external_event(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> bool:
    """The event `expr` names is made with `external=True` wherever it is made
    (`torch.cuda.Event(external=True)`, `torch.Event(..., external=True)`): stored in `self.X`,
    a local (also of an enclosing function), a module global, or an element of a list built that
    way (`[Event(external=True) for _ in ...]`, `.append(Event(external=True))`). Its record and
    wait become graph nodes on the live event, so waiting on it in a capture after an eager
    record, or across graphs, is legal (GROUND-TRUTH.md section 1). False when any binding is
    something else (`stream.record_event()`, a parameter, an unknown call)."""
    sources = _event_bindings(model, expr, fn)
    if _externality(model, sources, fn, 0) is True:
        return True
    # a helper's parameter (`def _wait(ev): ev.wait()`): external when every caller hands one
    handed = _handed_arguments(model, expr, fn)
    return bool(handed) and all(is_external_event(model, arg, caller) for arg, caller in handed if caller is not fn)


def _externality(
    model: ModuleModel, values: list[cst.BaseExpression], fn: FunctionInfo, depth: int
) -> bool | None:
    """True: every event among `values` is external (and there is one); False: some value is
    not known to be an external event; None: nothing but `None`/empty containers."""
    verdicts = [_external_value(model, value, fn, depth) for value in values]
    if any(v is False for v in verdicts):
        return False
    return True if any(v is True for v in verdicts) else None


def _external_value(model: ModuleModel, value: cst.BaseExpression, fn: FunctionInfo, depth: int) -> bool | None:
    if isinstance(value, cst.Call):
        if model.qualname(value.func) not in EVENT_CONSTRUCTORS:
            return False
        return any(
            arg.keyword is not None
            and arg.keyword.value == "external"
            and isinstance(arg.value, cst.Name)
            and arg.value.value == "True"
            for arg in value.args
        )
    if isinstance(value, cst.Name):
        if value.value == "None":
            return None
        if depth >= 3:
            return False
        return _externality(model, _event_bindings(model, value, fn), fn, depth + 1)
    if isinstance(value, cst.List | cst.Tuple | cst.Set):
        return _externality(model, [e.value for e in value.elements], fn, depth)
    if isinstance(value, cst.ListComp | cst.SetComp | cst.GeneratorExp):
        return _external_value(model, value.elt, fn, depth)
    if isinstance(value, cst.DictComp):
        return _external_value(model, value.value, fn, depth)
    if isinstance(value, cst.Dict):
        return _externality(model, [e.value for e in value.elements if isinstance(e, cst.DictElement)], fn, depth)
    if isinstance(value, cst.IfExp):
        return _externality(model, [value.body, value.orelse], fn, depth)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        # `[Event(external=True)] * n`
        sides = [s for s in (value.left, value.right) if not isinstance(s, cst.Integer | cst.Name | cst.Call)]
        return _externality(model, sides, fn, depth) if sides else False
    return False


def _event_bindings(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> list[cst.BaseExpression]:
    """Every value stored where `expr` (an event, or a container of events subscripted) lives:
    assignments to it or to its elements, and what `.append`/`.insert`/`.extend` add to it.
    Empty when it cannot be told (a parameter, another object's attribute)."""
    base = expr
    while isinstance(base, cst.Subscript):
        base = base.value
    attr = self_attribute(base)
    if attr is not None:
        if fn.cls is None:
            return []
        stored = stores_of_self(model, fn.cls).get(attr)
        return stored.values if stored is not None else []
    if isinstance(base, cst.Attribute) and isinstance(base.value, cst.Name):
        # `call.done` where `call = _SharedExpertCall(...)` in this function: what that class
        # stores in `self.done`
        cls = model._class_of_local(base.value.value, fn)
        if cls is None:
            return []
        stored = stores_of_self(model, cls).get(base.attr.value)
        return stored.values if stored is not None else []
    if not isinstance(base, cst.Name):
        return []
    name = base.value
    scope: FunctionInfo | None = fn
    while scope is not None:
        if name in scope.global_names:
            break
        if is_parameter(scope, name):
            return []  # handed in: made who knows how
        found = stores_by_key(model, [scope], name_of).get(name)
        if found is not None and found.values:
            return found.values
        scope = scope.parent
    return global_values(model, name)


@dataclass
class Stored:
    """What one place (a name, `self.X`) is given in some scopes: the values assigned or added to
    it (an unpacked one stands as `...` unless the unpacking pairs it with an element), and the
    first reason some store cannot be read (an augmented assignment, an unpacking, a loop)."""

    values: list[cst.BaseExpression] = field(default_factory=list)
    why: str | None = None

    def note(self, why: str) -> None:
        if self.why is None:
            self.why = why


def stores_by_key(
    model: ModuleModel, scopes: list[FunctionInfo], key_of: Callable[[cst.BaseExpression], str | None]
) -> dict[str, Stored]:
    """What each place (keyed by `key_of` of the assigned target, subscripts stripped) is given in
    `scopes`: assignments to it or to its elements, what `.append`/`.insert`/`.extend`/`.add` add,
    and why a store cannot be read."""
    found: dict[str, Stored] = {}
    for scope in scopes:
        for assign in scope.assignments:
            for target in assign.targets:
                key = key_of(unsubscripted(target))
                if key is not None:
                    if assign.value is None:
                        found.setdefault(key, Stored()).note("the event is bound by an augmented assignment")
                    else:
                        found.setdefault(key, Stored()).values.append(assign.value)
                    continue
                if not isinstance(target, cst.Tuple | cst.List):
                    continue
                values = assign.value
                paired = isinstance(values, cst.Tuple | cst.List) and len(values.elements) == len(target.elements)
                for index, element in enumerate(target.elements):
                    key = key_of(unsubscripted(element.value))
                    if key is None:
                        continue
                    stored = found.setdefault(key, Stored())
                    if values is None:
                        stored.note("the event is unpacked")
                        continue
                    stored.note(f"the event is unpacked from `{shortened(model.code_for(values))}`")
                    if paired:
                        stored.values.append(cast(cst.Tuple, values).elements[index].value)
                    else:
                        stored.values.append(cst.Ellipsis())  # unpacked from something opaque
        for site in scope.calls:
            if site.method in ("append", "insert", "extend", "add") and site.receiver is not None and site.node.args:
                key = key_of(unsubscripted(site.receiver))
                if key is not None:
                    found.setdefault(key, Stored()).values.append(site.node.args[-1].value)
        for loop in _loops(model, scope):  # `for ev in ...:` binds it from something unseen
            for name in walk(loop.target):
                key = key_of(name) if isinstance(name, cst.Name) else None
                if key is not None:
                    found.setdefault(key, Stored()).note(
                        f"the event is a loop variable over `{shortened(model.code_for(loop.iter))}`"
                    )
    return found


def stores_of_self(model: ModuleModel, cls: ClassInfo) -> dict[str, Stored]:
    """`stores_by_key` of every `self.X` over the methods of `cls`, indexed once per class (every
    event of a big class asks: not quadratic)."""
    return model.remembered(
        ("stores of self attributes", id(cls)),
        lambda: stores_by_key(model, [f for f in model.functions if f.cls is cls], self_attribute),
    )


def _loops(model: ModuleModel, fn: FunctionInfo) -> list[cst.For]:
    """The `for` statements of a function's body (nested ones included), found once per function."""
    return model.remembered(("for loops of", id(fn)), lambda: [n for n in walk(fn.node.body) if isinstance(n, cst.For)])


def shortened(text: str) -> str:
    """Code shown in a message: on one line, at most 50 characters."""
    text = " ".join(text.split())
    return text if len(text) <= 50 else text[:47] + "..."


def handed_in_by_caller(expr: cst.BaseExpression, fn: FunctionInfo) -> bool:
    """`ready`, `layer.done_event`, `events[i]` where the root name is a parameter of `fn` (or of
    a function enclosing it), not `self`: the caller made or recorded it."""
    root = expr
    while isinstance(root, cst.Attribute | cst.Subscript):
        root = root.value
    if not isinstance(root, cst.Name) or root.value in ("self", "cls"):
        return False
    scope: FunctionInfo | None = fn
    while scope is not None:
        if is_parameter(scope, root.value):
            return True
        if any(isinstance(t, cst.Name) and t.value == root.value for a in scope.assignments for t in a.targets):
            return False  # bound here first: a local of this call, not the caller's
        scope = scope.parent
    return False


def _calls_handing(
    model: ModuleModel, fn: FunctionInfo, parameter: str
) -> list[tuple[CallSite, cst.BaseExpression | None, bool]]:
    """Each same-module call of `fn`: the call site that stands for it, what it passes for
    `parameter` (None: nothing, a default), and whether the call sits in a lambda (then the site
    is the call that registers the lambda, which does not run it: the lambda runs as its hook)."""
    calls = [(site.node, site, False) for site in model.callers_of(fn)]
    calls += [(node, holder, True) for node, holder in _lambda_calls(model).get(id(fn), ())]
    return [
        (site, call_argument(node, fn.node.params, parameter, fn.is_method and isinstance(node.func, cst.Attribute)), in_lambda)
        for node, site, in_lambda in calls
    ]


def _handed_arguments(
    model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo
) -> list[tuple[cst.BaseExpression, FunctionInfo]]:
    """What the same-module callers of `fn` pass for the parameter `expr` is (`ev` in
    `def _wait(ev)`), each with the calling function; empty when `expr` is no parameter or some
    call passes none."""
    if not isinstance(expr, cst.Name) or not is_parameter(fn, expr.value):
        return []
    calls = _calls_handing(model, fn, expr.value)
    if any(passed is None for _, passed, _ in calls):
        return []
    return [(passed, site.function) for site, passed, _ in calls if passed is not None]


def handing_calls(
    model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo
) -> list[tuple[CallSite, cst.BaseExpression, bool]]:
    """The same-module calls of `fn` with what each hands for the parameter `expr` is rooted at
    (`self.event` for `ev` in `wait_for(self.event)`), as the caller names it (`ev.done` handed
    `slot` is `slot_arg.done`), and whether the call sits in a lambda (`_calls_handing`)."""
    root = unsubscripted(expr)
    while isinstance(root, cst.Attribute):
        root = unsubscripted(root.value)
    if not isinstance(root, cst.Name) or not is_parameter(fn, root.value):
        return []
    return [
        (site, _rebased(expr, root, passed), in_lambda)
        for site, passed, in_lambda in _calls_handing(model, fn, root.value)
        if passed is not None
    ]


def _rebased(expr: cst.BaseExpression, root: cst.Name, passed: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` with its root name read as `passed` (`slot.ready` with `slot` = `_SLOTS[n]`)."""
    if expr is root:
        return passed
    if isinstance(expr, cst.Attribute | cst.Subscript):
        return with_value(expr, _rebased(expr.value, root, passed))
    return expr


def returned_after_recording(model: ModuleModel, site: CallSite, event: cst.BaseExpression) -> bool:
    """`ready` bound once, before `site`, from a same-module call that records the event it
    returns (`shared, ready = _start_shared(..., self._join)`, whose body does
    `join.record(stream); return out, join`): recorded within this call, so in the same capture."""
    name = name_of(event)
    fn = site.function
    if name is None:
        return False
    bindings = [a for a in fn.assignments if a.order < site.order and any(_binds(t, name) for t in a.targets)]
    if len(bindings) != 1 or not isinstance(bindings[0].value, cst.Call):
        return False
    target = next(t for t in bindings[0].targets if _binds(t, name))
    index = None if isinstance(target, cst.Name) else next(
        i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name  # type: ignore[attr-defined]
    )
    helper = model._called_function(bindings[0].value, fn)
    if helper is None:
        return False
    recorded = False
    for ret in helper.returns:
        value = ret.node.value
        if index is not None:
            value = value.elements[index].value if isinstance(value, cst.Tuple) and index < len(value.elements) else None
        if value is None or (isinstance(value, cst.Name) and value.value == "None"):
            continue  # returns no event there: the wait's own `is not None` test covers it
        returned = name_of(value)
        if returned is None or not any(
            call.method in ("record", "record_event") and call.receiver is not None
            and name_of(call.receiver) == returned and call.order < ret.order
            for call in helper.calls
        ):
            return False
        recorded = True
    return recorded


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, cst.Tuple | cst.List):
        return any(isinstance(e.value, cst.Name) and e.value.value == name for e in target.elements)
    return False


def _lambda_calls(model: ModuleModel) -> dict[int, list[tuple[cst.Call, CallSite]]]:
    """Calls of same-module functions inside lambdas (`register_forward_pre_hook(lambda m, a:
    _await(_SLOTS[n]))`), which the walk of their enclosing function does not record (they run
    later, as the lambda), by callee, each with the call site holding the lambda. Indexed once per
    model: every handed-in event asks."""

    def index() -> dict[int, list[tuple[cst.Call, CallSite]]]:
        found: dict[int, list[tuple[cst.Call, CallSite]]] = {}
        seen: set[int] = set()  # a lambda inside nested calls is held by the outermost one
        for caller in model.functions:
            for site in caller.calls:
                for node in walk(site.node):
                    if not isinstance(node, cst.Lambda) or id(node) in seen:
                        continue
                    seen.add(id(node))
                    for inner in walk(node.body):
                        target = model._called_function(inner, caller) if isinstance(inner, cst.Call) else None
                        if target is not None:
                            found.setdefault(id(target), []).append((cast(cst.Call, inner), site))
        return found

    return model.remembered(("calls in lambdas",), index)


def recorded_into_local(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> bool:
    """`sent[i]`, or `ev` in `for ev in done:`, where the container is a local of this call (or of
    the call enclosing it) filled only with events recorded as they were added
    (`done.append(stream.record_event())`, `[main.record_event()] * n`): every element was
    recorded within this call, so in the same capture as any wait on it."""
    container = unsubscripted(expr)
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in ("pop", "get", "popleft")
    ):
        container = unsubscripted(expr.func.value)  # `pending.pop(i)`: an element of `pending`
    elif container is expr and isinstance(expr, cst.Name):
        loop = _loop_over(fn, expr)
        if loop is None:
            return False
        container = unsubscripted(loop)
    if not isinstance(container, cst.Name) or handed_in_by_caller(container, fn):
        return False
    values = _event_bindings(model, container, fn)
    return bool(values) and all(_recorded_as_made(model, fn, value) for value in values)


def _loop_over(fn: FunctionInfo, use: cst.Name) -> cst.BaseExpression | None:
    """What the innermost `for <use> in <it>:` of `fn` around `use` iterates over (None: `use`
    is not a loop variable there)."""
    found: cst.BaseExpression | None = None
    for node in walk(fn.node.body):
        if (
            isinstance(node, cst.For)
            and isinstance(node.target, cst.Name)
            and node.target.value == use.value
            and any(inner is use for inner in walk(node.body))
        ):
            found = node.iter  # walked outer loops first: the last one found is innermost
    return found


def _recorded_as_made(model: ModuleModel, fn: FunctionInfo, value: cst.BaseExpression) -> bool:
    """`s.record_event()`, a same-module helper returning an event it made and recorded
    (`ev = Event(); ev.record(); return ev`), a list or tuple of those (`[]` and `{}` included),
    `[...] * n`, a comprehension."""
    if isinstance(value, cst.Call):
        if isinstance(value.func, cst.Attribute) and value.func.attr.value == "record_event":
            return True
        helper = model._called_function(value, fn)
        return helper is not None and _returns_fresh_recorded_event(helper)
    if isinstance(value, cst.List | cst.Tuple):
        return all(_recorded_as_made(model, fn, e.value) for e in value.elements)
    if isinstance(value, cst.Dict):
        return not value.elements
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return _recorded_as_made(model, fn, value.left) or _recorded_as_made(model, fn, value.right)
    if isinstance(value, cst.ListComp):
        return _recorded_as_made(model, fn, value.elt)
    return False


def _returns_fresh_recorded_event(helper: FunctionInfo) -> bool:
    """Every `return` of `helper` gives a local it bound to a new event and recorded before."""
    if not helper.returns:
        return False
    for ret in helper.returns:
        name = name_of(ret.node.value) if ret.node.value is not None else None
        if name is None:
            return False
        made = [
            a for a in helper.assignments
            if any(name_of(t) == name for t in a.targets) and a.order < ret.order
        ]
        if not made or not all(
            isinstance(a.value, cst.Call) and (dotted_name(a.value.func) or "").endswith("Event") for a in made
        ):
            return False
        if not any(
            call.method in ("record", "record_event") and call.receiver is not None and name_of(call.receiver) == name
            and call.order < ret.order
            for call in helper.calls
        ):
            return False
    return True
