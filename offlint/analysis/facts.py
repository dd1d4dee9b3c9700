"""Dataflow facts several rules ask about (kept here so no rule answers them twice): what kind an
expression is (an event, a stream), where a local or attribute is bound and what a call passes or
returns, where events are recorded within a call. Stream roles, forks and joins are `streams.py`;
closures of one enclosing call `closures.py`; capture bookkeeping `capture_tags.py`, event
construction `events.py`, device placement `placement.py`, reachability `reachability.py`."""

from __future__ import annotations

import libcst as cst

from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import Kind, Typed, self_attribute
from offlint.analysis.model import ModuleModel, module_level_assigns
from offlint.analysis.program import Assignment, CallSite, ClassInfo, FunctionInfo
from offlint.analysis.syntax import call_argument, parameter_names, same_code, walk


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


def events_recorded_into(fn: FunctionInfo, after: int = -1) -> set[str]:
    """Plain names `fn` records an event into after the point `after`: `ev = s.record_event()`,
    `ev.record()`."""
    found = {
        c.receiver.value
        for c in fn.calls
        if c.order > after and c.method == "record" and isinstance(c.receiver, cst.Name)
    }
    for a in fn.assignments:
        value = a.value
        if (
            a.order > after
            and isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "record_event"
        ):
            found.update(t.value for t in a.targets if isinstance(t, cst.Name))
    return found


def is_parameter(fn: FunctionInfo, name: str) -> bool:
    return name in parameter_names(fn.node.params)


def called_function(model: ModuleModel, site: CallSite) -> FunctionInfo | None:
    """The same-module function a call site reaches (`f()` or `self.m()`), else None."""
    return model._called_function(site.node, site.function)


def class_assignments(model: ModuleModel, cls: ClassInfo) -> dict[str, list[tuple[FunctionInfo, Assignment]]]:
    """Every `self.<attr> = ...` in the functions of `cls`, by attr, with the function: indexed once
    per class (the rules ask at every use of an attribute)."""

    def index() -> dict[str, list[tuple[FunctionInfo, Assignment]]]:
        found: dict[str, list[tuple[FunctionInfo, Assignment]]] = {}
        for fn in model.functions:
            if not model.runs_on(fn, cls):
                continue
            for assign in fn.assignments:
                for target in assign.targets:
                    attr = self_attribute(target)
                    if attr is not None:
                        found.setdefault(attr, []).append((fn, assign))
        return found

    return model.remembered(("self attribute assignments", id(cls)), index)


def values_assigned(model: ModuleModel, fn: FunctionInfo | None, target: str) -> list[cst.BaseExpression]:
    """Values assigned to a local name (`target`, searched in `fn` and its enclosing functions)
    or to `self.attr` (`target` = "self.attr", searched in every method of `fn`'s class)."""
    out: list[cst.BaseExpression] = []
    if target.startswith("self."):
        if fn is None or fn.cls is None:
            return out
        return [a.value for _, a in class_assignments(model, fn.cls).get(target[5:], ()) if a.value is not None]
    scope = fn
    while scope is not None:
        for assign in scope.assignments:
            if assign.value is not None and any(isinstance(t, cst.Name) and t.value == target for t in assign.targets):
                out.append(assign.value)
        if out or is_parameter(scope, target):
            return out
        scope = scope.parent
    return out


def is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def returned_values(
    model: ModuleModel, call: cst.Call, fn: FunctionInfo | None
) -> list[tuple[cst.BaseExpression, FunctionInfo]]:
    """What the same-module function `call` reaches returns (None aside), with that function."""
    target = model._called_function(call, fn)
    if target is None:
        return []
    return [
        (ret.node.value, target) for ret in target.returns if ret.node.value is not None and not is_none(ret.node.value)
    ]


def global_values(model: ModuleModel, name: str) -> list[cst.BaseExpression]:
    """The values module-level `name = ...` statements assign (also under module-level `if`/`try`
    blocks), and functions that declare `global name`."""
    out: list[cst.BaseExpression] = []
    for small in module_level_assigns(model.module):
        if any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets):
            out.append(small.value)
    for fn in model.functions:
        if name in fn.global_names:
            out.extend(
                a.value
                for a in fn.assignments
                if a.value is not None and any(isinstance(t, cst.Name) and t.value == name for t in a.targets)
            )
    return out


def condition_atoms(guards: tuple[tuple[cst.BaseExpression, bool], ...]) -> list[tuple[cst.BaseExpression, bool]]:
    """The conditions `if`/`while` tests impose, one per conjunct: `if a and not b:` gives (a,
    True) and (b, False) in its body; `if a or b:` gives (a, False) and (b, False) in its else."""
    out: list[tuple[cst.BaseExpression, bool]] = []
    stack = list(guards)
    while stack:
        test, holds = stack.pop()
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            stack.append((test.expression, not holds))
        elif isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And if holds else cst.Or):
            stack.extend(((test.left, holds), (test.right, holds)))
        else:
            out.append((test, holds))
    return out


def recorded_earlier_in_call(site: CallSite, event: cst.BaseExpression) -> bool:
    """`event.record()` (the same expression: `self.done`, `self.ready[i]`) runs earlier in the
    same call whenever `site` runs - not in a branch `site` is outside of - so a wait at `site`
    waits on a record of the same capture."""
    fn = site.function
    for other in fn.calls:
        if other.order >= site.order or other.receiver is None:
            continue
        if not _records_into(fn, other, event):
            continue
        if _conditions_hold_at(fn, other, site):
            return True
    return False


def _conditions_hold_at(fn: FunctionInfo, earlier: CallSite, site: CallSite) -> bool:
    """Whatever `earlier` runs under also holds where `site` runs: its `if`s enclose `site`
    too, or - past the ones they share - each condition it adds is tested again, with the same
    outcome, around `site` (`if ag and k == last: ev.record()` ... `elif ag and k == last:
    s.wait_event(ev)`, flashinfer's PCIe all-reduce) on plain locals nothing rebinds between."""
    shared = 0
    for (test, holds), (other_test, other_holds) in zip(earlier.guards, site.guards, strict=False):
        if test is not other_test or holds != other_holds:
            break
        shared += 1
    added = condition_atoms(earlier.guards[shared:])
    if not added:
        return True
    around_site = condition_atoms(site.guards[shared:])
    if not all(
        _pure_local_test(test) and any(held == h and same_code(test, t) for t, h in around_site) for test, held in added
    ):
        return False
    names = {node.value for test, _ in added for node in walk(test) if isinstance(node, cst.Name)}
    return not _rebound_between(fn, names, earlier, site)


# what a re-tested condition may be made of: locals, literals and operators (no call, attribute or
# subscript, whose value the code between the two tests may change)
_PURE_TEST_NODES = (
    cst.Name,
    cst.Integer,
    cst.Float,
    cst.SimpleString,
    cst.Comparison,
    cst.ComparisonTarget,
    cst.BooleanOperation,
    cst.UnaryOperation,
    cst.BinaryOperation,
    cst.BaseCompOp,
    cst.BaseBooleanOp,
    cst.BaseUnaryOp,
    cst.BaseBinaryOp,
)


def _pure_local_test(test: cst.BaseExpression) -> bool:
    return all(isinstance(node, _PURE_TEST_NODES) for node in walk(test))


def _rebound_between(fn: FunctionInfo, names: set[str], earlier: CallSite, site: CallSite) -> bool:
    """One of `names` may change between `earlier` and `site`: assigned in between, or bound by a
    loop that does not hold both (one that does rebinds it before `earlier` each time round)."""
    for assign in fn.assignments:
        if earlier.order < assign.order < site.order and any(
            isinstance(node, cst.Name) and node.value in names for target in assign.targets for node in walk(target)
        ):
            return True
    for node in walk(fn.node.body):
        if isinstance(node, cst.For | cst.NamedExpr) and any(
            isinstance(bound, cst.Name) and bound.value in names for bound in walk(node.target)
        ):
            inside = {id(n) for n in walk(node)} if isinstance(node, cst.For) else set()
            if id(earlier.node) not in inside or id(site.node) not in inside:
                return True
    return False


def _records_into(fn: FunctionInfo, site: CallSite, event: cst.BaseExpression) -> bool:
    """`site` records the event `event` names: `event.record()`, `stream.record_event(event)`, or
    `event = stream.record_event()` (the same expression: `self.done`, `self.ready[i]`)."""
    if site.method == "record" and site.receiver is not None:
        return len(site.node.args) <= 1 and same_code(site.receiver, event)
    if site.method != "record_event":
        return False
    if site.node.args:
        return len(site.node.args) == 1 and same_code(site.node.args[0].value, event)
    return any(
        a.value is site.node and any(same_code(t, event) for t in a.targets) for a in fn.assignments
    )


def argument_for(site: CallSite, fn: FunctionInfo, name: str) -> cst.BaseExpression | None:
    """The expression a call site passes for `fn`'s parameter `name` (`self` is bound by
    `self.m(...)`); None when it passes none (a default, `*args`)."""
    bound = fn.cls is not None and fn.parent is None and isinstance(site.node.func, cst.Attribute)
    return call_argument(site.node, fn.node.params, name, bound)


def is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def made_on_cache_miss(site: CallSite) -> bool:
    """The call runs only when a cache lacks its key, and fills it: `x = cache.get(k)` ... `if x is
    None: x = <make>; cache[k] = x`, or `if k not in cache: cache[k] = <make>`. It runs at the
    first call per key - an engine's eager warm-up at each shape it then captures - so a capture
    that follows takes the cached value."""
    fn = site.function
    for test, taken in site.guards:
        if not taken or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            continue
        comparison = test.comparisons[0]
        cache: cst.BaseExpression | None = None
        if isinstance(comparison.operator, cst.Is) and is_none(comparison.comparator) and isinstance(test.left, cst.Name):
            name = test.left.value
            for assign in fn.assignments:
                value = assign.value
                if (
                    assign.order < site.order
                    and any(isinstance(t, cst.Name) and t.value == name for t in assign.targets)
                    and isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value == "get"
                ):
                    cache = value.func.value
        elif isinstance(comparison.operator, cst.NotIn):
            cache = comparison.comparator
        if cache is not None and any(
            isinstance(t, cst.Subscript) and same_code(t.value, cache) for a in fn.assignments for t in a.targets
        ):
            return True
    return False
