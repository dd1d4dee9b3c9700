"""A wait on an event recorded in another call, whose producer cannot be re-issued there
(OFL101, OFL202): make the event external where it is made.

`torch.cuda.Event(external=True)`: its record and wait become graph nodes on the live event, so a
wait inside a capture after an eager record, a record in one graph and a wait in another, and an
eager wait after a replay all capture and replay (shared/GROUND-TRUTH.md section 1; Megatron-LM's
offloading relies on it). Eager behaviour is unchanged. Inside a graph the wait now waits, at
each replay, on whatever last recorded the event (the eager producer, or another graph), not on
the record seen at capture time: correct when the producer runs before each replay, as the
original code intended; the tensors the producer writes must stay at the addresses the graph
reads (OFL201/OFL203 say where they do not). Unsafe for that reason.

Follows the event from the wait back to every place it is made (`self.E`, `self.E[i]`, a local,
a module global; lists and comprehensions of them; `.append(...)`). Each must be a constructor
call; an event made elsewhere (handed in, popped from a pool, `stream.record_event()`) is left,
with that reason, and so is one the module never records (its producer is not in view). Runs
after `event_handoff.py`, on the findings it left; compile-safe, the hand-offs that fixer leaves
for the capture state stay left (their producer re-made tensors the graph would not read). The
rewrite itself adds no capture test.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from libcst import matchers as m

from offlint.analysis.events import shortened, stores_by_key, stores_of_self
from offlint.analysis.facts import is_parameter
from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import CallSite, FunctionInfo, ModuleModel
from offlint.analysis.syntax import name_of, unsubscripted, walk
from offlint.analysis.torch_api import EVENT_CONSTRUCTORS
from offlint.diagnostics import Confidence
from offlint.fixing.edits import Owner, StatementPlan
from offlint.fixing.event_handoff import COMPILE_SAFE_REASON as HANDOFF_COMPILE_SAFE_REASON
from offlint.fixing.event_handoff import handoff_of
from offlint.fixing.findings import at_call_sites

RULES = ("OFL101", "OFL202")
_EXTERNAL = m.Arg(keyword=m.Name("external"))


def plan_external_events(model: ModuleModel, floor: Confidence, *, compile_safe: bool = False) -> StatementPlan:
    plan = StatementPlan()
    by_statement: dict[cst.BaseStatement, tuple[list[cst.Call], list[Owner]]] = {}
    for found, site in at_call_sites(model, RULES, floor):
        if compile_safe and handoff_of(model, site) is not None:
            # the hand-off fixer's (re-issue keeps the addresses the graph reads), which
            # compile-safe leaves: an external event would not make it correct
            plan.not_fixed.append((found.code, found.node, HANDOFF_COMPILE_SAFE_REASON))
            continue
        made = _constructors(model, site)
        if isinstance(made, str):
            plan.not_fixed.append((found.code, found.node, made))
            continue
        places = [(call, _statement_of(model, call)) for call in made]
        if any(statement is None for _, statement in places):
            plan.not_fixed.append((found.code, found.node, "the event is made outside any statement"))
            continue
        for call, statement in places:
            assert statement is not None
            calls, owners = by_statement.setdefault(statement, ([], []))
            if not any(c is call for c in calls):
                calls.append(call)
            owners.append(Owner(found.code, found.node))
    for statement, (calls, owners) in by_statement.items():
        marked = statement.visit(_MarkExternal(calls))
        assert isinstance(marked, cst.BaseStatement)
        with plan.owning(owners):
            plan.replace(
                statement,
                marked,
                RULES,
                "make the event external: its wait is legal across capture boundaries",
            )
    return plan


class _MarkExternal(cst.CSTTransformer):
    def __init__(self, calls: list[cst.Call]) -> None:
        super().__init__()
        self.calls = calls

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if not any(c is original_node for c in self.calls):
            return updated_node
        if any(m.matches(arg, _EXTERNAL) for arg in updated_node.args):
            return updated_node
        args = list(updated_node.args)
        if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(cst.Arg(keyword=cst.Name("external"), value=cst.Name("True"), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        )))
        return updated_node.with_changes(args=args)


def _statement_of(model: ModuleModel, node: cst.CSTNode) -> cst.BaseStatement | None:
    """The simple statement line holding `node`, else the innermost compound statement."""
    simple, compound = model.remembered(("statements holding each node",), lambda: _statement_index(model))
    return simple.get(id(node)) or compound.get(id(node))


def _statement_index(
    model: ModuleModel,
) -> tuple[dict[int, cst.BaseStatement], dict[int, cst.BaseStatement]]:
    """For every node of the module, its simple statement line and its innermost compound
    statement (by id): built once, where a search per event walked the whole module each time."""
    simple: dict[int, cst.BaseStatement] = {}
    compound: dict[int, cst.BaseStatement] = {}
    for stmt in walk(model.module):  # outer statements first: inner ones overwrite them
        if isinstance(stmt, cst.SimpleStatementLine):
            for n in walk(stmt):
                simple[id(n)] = stmt
        elif isinstance(stmt, cst.BaseCompoundStatement):
            for n in walk(stmt):
                compound[id(n)] = stmt
    return simple, compound


def _constructors(model: ModuleModel, site: CallSite) -> list[cst.Call] | str:
    """Every constructor call the waited event comes from, or why they cannot all be found."""
    event = site.receiver if site.method == "wait" else site.node.args[0].value
    assert event is not None
    fn = site.function
    values = _bindings(model, fn, event)
    if isinstance(values, str):
        return values
    made: list[cst.Call] = []
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        if isinstance(value, cst.Call) and model.qualname(value.func) in EVENT_CONSTRUCTORS:
            made.append(value)
        elif isinstance(value, cst.List | cst.Tuple | cst.Set):  # `[]`/`{}`: filled elsewhere
            stack.extend(e.value for e in value.elements)
        elif isinstance(value, cst.Dict):
            stack.extend(e.value for e in value.elements if isinstance(e, cst.DictElement))
        elif isinstance(value, cst.ListComp | cst.GeneratorExp):
            stack.append(value.elt)
        elif isinstance(value, cst.DictComp):
            stack.append(value.value)
        elif isinstance(value, cst.IfExp):
            stack.extend((value.body, value.orelse))
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
            stack.extend(s for s in (value.left, value.right) if not isinstance(s, cst.Integer | cst.Name))
        else:
            return f"`{model.code_for(event)}` is made by `{shortened(model.code_for(value))}`, not an event constructor of this module"
    if not made:
        return f"no event constructor for `{model.code_for(event)}` in this module"
    if not _recorded_in_view(model, fn, event):
        return (
            f"`{model.code_for(event)}` is never recorded in this module: whether its producer "
            "suits an external event is not in view"
        )
    return made


def _recorded_in_view(model: ModuleModel, fn: FunctionInfo, event: cst.BaseExpression) -> bool:
    """Some call of the module records the event: `<same storage>.record(...)` (by its `self.`
    attribute or name, subscripts aside), or a local recorded and then stored there."""
    base = unsubscripted(event)
    attr = self_attribute(base)
    name = base.value if isinstance(base, cst.Name) else None
    if attr is not None:
        cls = fn.cls

        def index() -> set[str]:
            return _recorded_keys(model, [f for f in model.functions if f.cls is cls], self_attribute)

        return attr in model.remembered(("self attributes recorded", id(cls)), index)

    def same(expr: cst.BaseExpression) -> bool:
        inner = unsubscripted(expr)
        if attr is not None:
            return self_attribute(inner) == attr
        return name is not None and isinstance(inner, cst.Name) and inner.value == name

    for scope in model.functions:
        if attr is not None and scope.cls is not fn.cls:
            continue
        recorded = {
            site.receiver.value
            for site in scope.calls
            if site.method == "record" and isinstance(site.receiver, cst.Name)
        }
        for site in scope.calls:
            if site.method == "record" and site.receiver is not None and same(site.receiver):
                return True
        for assign in scope.assignments:  # `ev.record(); self.E[i] = ev`
            if isinstance(assign.value, cst.Name) and assign.value.value in recorded and any(same(t) for t in assign.targets):
                return True
    return False


def _recorded_keys(
    model: ModuleModel, scopes: list[FunctionInfo], key_of: Callable[[cst.BaseExpression], str | None]
) -> set[str]:
    """The places (by `key_of`, subscripts stripped) some call of `scopes` records an event into:
    `<place>.record(...)`, or a local recorded and then stored there."""
    keys: set[str] = set()
    for scope in scopes:
        recorded = {
            site.receiver.value
            for site in scope.calls
            if site.method == "record" and isinstance(site.receiver, cst.Name)
        }
        for site in scope.calls:
            if site.method == "record" and site.receiver is not None:
                key = key_of(unsubscripted(site.receiver))
                if key is not None:
                    keys.add(key)
        for assign in scope.assignments:  # `ev.record(); self.E[i] = ev`
            if isinstance(assign.value, cst.Name) and assign.value.value in recorded:
                keys.update(k for t in assign.targets if (k := key_of(unsubscripted(t))) is not None)
    return keys


def _bindings(model: ModuleModel, fn: FunctionInfo, event: cst.BaseExpression) -> list[cst.BaseExpression] | str:
    base = event
    while isinstance(base, cst.Subscript):
        base = base.value
    attr = self_attribute(base)
    if attr is not None:
        if fn.cls is None:
            return f"`{model.code_for(event)}` is an attribute of an object this code does not define"
        stored = stores_of_self(model, fn.cls).get(attr)
        return [] if stored is None else stored.why or stored.values
    if not isinstance(base, cst.Name):
        return f"`{model.code_for(event)}` belongs to another object (made where this module cannot see)"
    name = base.value
    scope: FunctionInfo | None = fn
    while scope is not None:
        if is_parameter(scope, name):
            return f"`{model.code_for(event)}` is handed in by the caller of `{scope.qualname}`"
        stored = stores_by_key(model, [scope], name_of).get(name)
        if stored is not None and (stored.why or stored.values):
            return stored.why or stored.values
        scope = scope.parent
    found = [
        stmt.value
        for line in model.module.body
        if isinstance(line, cst.SimpleStatementLine)
        for stmt in line.body
        if isinstance(stmt, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name for t in stmt.targets)
    ]
    return found or f"`{name}` is bound where this module cannot see"


