"""Closures of one enclosing call: hooks and helpers a function makes and hands out in the same
call (a pre-hook and a post-hook of one layer), which share its locals - a fork one of them makes
may be joined by a sibling, an event one records may be waited on by another."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from offlint.analysis.facts import events_recorded_into, is_parameter, local_name
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import CallSite, FunctionInfo
from offlint.analysis.syntax import walk


def hands_out_closures(model: ModuleModel, enclosing: FunctionInfo) -> bool:
    """`enclosing` hands a function defined in it out beyond its own call: registers it as a hook
    and keeps the registration (no `handle.remove()` in the same call), returns it, or stores it
    (`self.hook = f`, `module.forward = f`, `hooks.append(f)`). Its closure variables then live
    from one call of that function to the next - an installer's `ready` event is recorded by one
    layer's hook and waited on by the next layer's, maybe across a capture boundary - rather than
    within one call of `enclosing` (hooks added and removed around one forward)."""
    nested = {f.name for f in model.functions if f.parent is enclosing}
    if not nested:
        return False

    def names_nested(expr: cst.BaseExpression | None) -> bool:
        return expr is not None and any(isinstance(n, cst.Name) and n.value in nested for n in walk(expr))

    # hooks registered for the duration of the call: their handles are removed before it ends,
    # by the enclosing function or by the hooks themselves (one-shot hooks)
    removes = any(
        site.method == "remove" and not site.node.args for f in functions_within(model, enclosing) for site in f.calls
    )
    for site in enclosing.calls:
        if not any(names_nested(arg.value) for arg in site.node.args):
            continue
        method = site.method or ""
        if method.startswith("register") and "hook" in method:
            if not removes:
                return True
        elif method in ("append", "extend", "add", "insert", "setdefault"):
            return True
    if any(ret.node.value is not None and names_nested(ret.node.value) for ret in enclosing.returns):
        return True
    return any(
        names_nested(a.value) and any(not isinstance(t, cst.Name) for t in a.targets) for a in enclosing.assignments
    )


def sibling_within_call(model: ModuleModel, fn: FunctionInfo, key: str, test: Callable[[CallSite], bool]) -> bool:
    """`fn` is nested in a function that keeps its closures to one call (`hands_out_closures` is
    False: hooks added for one forward and removed again), and another function defined in that
    call satisfies `test`: a pre-dispatch hook forks `self.alt_stream`, its post-dispatch sibling
    joins it, within one call of the enclosing forward (MoE shared-expert overlap)."""
    enclosing = fn.parent
    if enclosing is None or key.startswith("local:") or hands_out_closures(model, enclosing):
        return False
    return any(
        other is not fn and carries_key(fn, other, key) and any(test(site) for site in other.calls)
        for other in functions_within(model, enclosing)
    )


def carries_key(fn: FunctionInfo, callee: FunctionInfo, key: str) -> bool:
    """Whether a stream key means the same stream in a callee (`self.` keys within one class,
    globals and the current/default streams everywhere)."""
    if key.startswith("self."):
        return callee.cls is not None and callee.cls is fn.cls
    return not key.startswith("local:")


def functions_within(model: ModuleModel, outer: FunctionInfo) -> list[FunctionInfo]:
    return [f for f in model.functions if _is_within(f, outer)]


def _is_within(fn: FunctionInfo | None, outer: FunctionInfo) -> bool:
    while fn is not None:
        if fn is outer:
            return True
        fn = fn.parent
    return False


def _binding_enclosure(fn: FunctionInfo, name: str) -> FunctionInfo | None:
    """The nearest enclosing function that holds `name` as its own variable."""
    enclosing = fn.parent
    while enclosing is not None and not _holds_own_local(enclosing, name):
        enclosing = enclosing.parent
    return enclosing


def _holds_own_local(fn: FunctionInfo, name: str) -> bool:
    """`name` is `fn`'s own variable (an argument, or assigned without `nonlocal`), not a closure's."""
    if name in fn.nonlocals:
        return False
    return is_parameter(fn, name) or any(
        isinstance(t, cst.Name) and t.value == name for a in fn.assignments for t in a.targets
    )


def recorded_in_enclosing_call(model: ModuleModel, site: CallSite, name: str) -> bool:
    """`ev` is a local of an enclosing function (a closure variable here), and that function or
    one nested in it records an event into it: the event lives and is recorded within one call of
    the enclosing function, so in the same capture as the wait (hooks and callbacks defined for
    one forward, as MoE dispatch overlap does)."""
    if _holds_own_local(site.function, name):
        return False
    enclosing = _binding_enclosure(site.function, name)
    if enclosing is None or hands_out_closures(model, enclosing):
        return False
    return any(name in events_recorded_into(f) for f in functions_within(model, enclosing))


def joined_within_enclosing_call(model: ModuleModel, fn: FunctionInfo, order: int) -> bool:
    """After the fork at `order`, `fn` (a nested function) records an event into a closure
    variable (`nonlocal ev; ev = side.record_event()`) that a function of the same enclosing call
    waits on: the join happens within one call of the enclosing function (MoE dispatch hooks)."""
    for name in events_recorded_into(fn, after=order):
        if _holds_own_local(fn, name):
            continue
        enclosing = _binding_enclosure(fn, name)
        if enclosing is None or hands_out_closures(model, enclosing):
            continue
        for f in functions_within(model, enclosing):
            for c in f.calls:
                waited = c.node.args[0].value if c.method == "wait_event" and c.node.args else None
                if c.method == "wait" and c.receiver is not None:
                    waited = c.receiver
                if waited is not None and local_name(waited) == name:
                    return True
    return False
