"""Stream dataflow several rules ask about (kept here so no rule answers them twice): which
stream an expression is (current, side, default), where each side stream is forked and joined,
where each event is recorded, along every path and through helper calls. Capture bookkeeping
lives in `capture_tags.py`, event construction in `events.py`, device placement in
`placement.py`, reachability in `reachability.py`."""

from __future__ import annotations

import enum
from collections.abc import Callable

import libcst as cst

from offlint.analysis.capture_tags import capture_bookkeeping_tests
from offlint.analysis.context import Context
from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import Kind, Typed, self_attribute
from offlint.analysis.model import ModuleModel, module_level_assigns
from offlint.analysis.program import CallSite, FunctionInfo, StreamScope
from offlint.analysis.syntax import call_argument, parameter_names, same_code, walk
from offlint.analysis.torch_api import (
    CURRENT_STREAM,
    DEVICE_SYNCS,
    EVENT_HOST_METHODS,
)


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
    return any(name in events_recorded_into(f) for f in _functions_within(model, enclosing))


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
        for f in _functions_within(model, enclosing):
            for c in f.calls:
                waited = c.node.args[0].value if c.method == "wait_event" and c.node.args else None
                if c.method == "wait" and c.receiver is not None:
                    waited = c.receiver
                if waited is not None and local_name(waited) == name:
                    return True
    return False


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
        site.method == "remove" and not site.node.args for f in _functions_within(model, enclosing) for site in f.calls
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
        other is not fn and _carries_key(fn, other, key) and any(test(site) for site in other.calls)
        for other in _functions_within(model, enclosing)
    )


def joined_by_sibling(model: ModuleModel, fn: FunctionInfo, key: str) -> bool:
    return sibling_within_call(model, fn, key, lambda site: is_join_of(model, site, key))


def forked_by_sibling(model: ModuleModel, fn: FunctionInfo, key: str) -> bool:
    return sibling_within_call(model, fn, key, lambda site: fork_key(model, site) == key)


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


def _holds_own_local(fn: FunctionInfo, name: str) -> bool:
    """`name` is `fn`'s own variable (an argument, or assigned without `nonlocal`), not a closure's."""
    if name in fn.nonlocals:
        return False
    return is_parameter(fn, name) or any(
        isinstance(t, cst.Name) and t.value == name for a in fn.assignments for t in a.targets
    )


def _binding_enclosure(fn: FunctionInfo, name: str) -> FunctionInfo | None:
    """The nearest enclosing function that holds `name` as its own variable."""
    enclosing = fn.parent
    while enclosing is not None and not _holds_own_local(enclosing, name):
        enclosing = enclosing.parent
    return enclosing


def _functions_within(model: ModuleModel, outer: FunctionInfo) -> list[FunctionInfo]:
    return [f for f in model.functions if _is_within(f, outer)]


def _is_within(fn: FunctionInfo | None, outer: FunctionInfo) -> bool:
    while fn is not None:
        if fn is outer:
            return True
        fn = fn.parent
    return False


def is_parameter(fn: FunctionInfo, name: str) -> bool:
    return name in parameter_names(fn.node.params)


# ---------------------------------------------------------------- OFL2xx/OFL301 helpers


def called_function(model: ModuleModel, site: CallSite) -> FunctionInfo | None:
    """The same-module function a call site reaches (`f()` or `self.m()`), else None."""
    return model._called_function(site.node, site.function)


# ---------------------------------------------------------------- OFL102-OFL107 helpers
class StreamRole(enum.Enum):
    CURRENT = "current"  # torch.cuda.current_stream(), or a name assigned only from it
    DEFAULT = "default"  # torch.cuda.default_stream()
    SIDE = "side"  # a stream known to be another one: torch.cuda.Stream(), self.alt_stream, ...
    UNKNOWN = "unknown"  # a parameter, a call result, anything else


# name fragments that say "this is the compute stream" (`self.main_stream`, `compute_stream`)
_CURRENTISH = ("current", "cur_", "main", "compute", "default", "orig", "prev", "caller")
_SIDE_CONSTRUCTORS = frozenset({"torch.cuda.Stream", "torch.cuda.ExternalStream"})
_DEFAULT_STREAM = "torch.cuda.default_stream"


def values_assigned(model: ModuleModel, fn: FunctionInfo | None, target: str) -> list[cst.BaseExpression]:
    """Values assigned to a local name (`target`, searched in `fn` and its enclosing functions)
    or to `self.attr` (`target` = "self.attr", searched in every method of `fn`'s class)."""
    out: list[cst.BaseExpression] = []
    if target.startswith("self."):
        if fn is None or fn.cls is None:
            return out
        attr = target[5:]
        for other in model.functions:
            if other.cls is not fn.cls:
                continue
            for assign in other.assignments:
                if assign.value is not None and any(self_attribute(t) == attr for t in assign.targets):
                    out.append(assign.value)
        return out
    scope = fn
    while scope is not None:
        for assign in scope.assignments:
            if assign.value is not None and any(isinstance(t, cst.Name) and t.value == target for t in assign.targets):
                out.append(assign.value)
        if out or is_parameter(scope, target):
            return out
        scope = scope.parent
    return out


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _currentish(name: str) -> bool:
    low = name.lower().lstrip("_")
    return low.startswith("cur") or any(part in low for part in _CURRENTISH)


def stream_role(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo | None, _depth: int = 0) -> StreamRole:
    """The role of a stream expression (see `StreamRole`). Conservative: a parameter, or a name or
    attribute assigned from anything but a stream constructor, is UNKNOWN unless its kind says
    stream and its name does not suggest the compute stream."""
    if _depth > 4:
        return StreamRole.UNKNOWN
    if isinstance(expr, cst.Call):
        q = model.qualname(expr.func)
        if q in CURRENT_STREAM:
            return StreamRole.CURRENT
        if q == _DEFAULT_STREAM:
            return StreamRole.DEFAULT
        if q in _SIDE_CONSTRUCTORS:
            return StreamRole.SIDE
        # `get_side_stream()`: what a same-module function returns (a lazily made module stream)
        roles = {stream_role(model, value, target, _depth + 1) for value, target in _returned_values(model, expr, fn)}
        return roles.pop() if len(roles) == 1 else StreamRole.UNKNOWN
    if isinstance(expr, cst.Name):
        if fn is not None and is_parameter(fn, expr.value):
            # a stream every same-module caller hands in: the role the callers' streams have
            handed = fn.handed_args.get(expr.value)
            if not handed:
                return StreamRole.UNKNOWN
            roles = {stream_role(model, arg, caller, _depth + 1) for arg, caller in handed}
            return roles.pop() if len(roles) == 1 else StreamRole.UNKNOWN
        values = [v for v in values_assigned(model, fn, expr.value) if not _is_none(v)]
        if not values:
            values = [v for v in global_values(model, expr.value) if not _is_none(v)]
            if not values:
                return StreamRole.UNKNOWN
        roles = {stream_role(model, v, fn, _depth + 1) for v in values}
        return roles.pop() if len(roles) == 1 else StreamRole.UNKNOWN
    node = expr.value if isinstance(expr, cst.Subscript) else expr
    attr = self_attribute(node)
    if attr is None or fn is None or fn.cls is None:
        return StreamRole.UNKNOWN
    values = [v for v in values_assigned(model, fn, f"self.{attr}") if not _is_none(v)]
    roles = {stream_role(model, v, fn, _depth + 1) for v in values} if node is expr else set()
    if StreamRole.CURRENT in roles or StreamRole.DEFAULT in roles:
        return roles.pop() if len(roles) == 1 else StreamRole.UNKNOWN
    if _currentish(attr):
        return StreamRole.UNKNOWN
    if roles == {StreamRole.SIDE}:
        return StreamRole.SIDE
    typed = fn.cls.attr_elements.get(attr) if node is not expr else fn.cls.attrs.get(attr)
    if typed is not None and typed.kind is Kind.STREAM and (not typed.guessed or fn.cls.offloader_style):
        return StreamRole.SIDE
    if node is expr and typed is None:
        guess = model.oracle.guess_from_name(expr)
        if guess.kind is Kind.STREAM and fn.cls.offloader_style:
            return StreamRole.SIDE
    return StreamRole.UNKNOWN


def _returned_values(
    model: ModuleModel, call: cst.Call, fn: FunctionInfo | None
) -> list[tuple[cst.BaseExpression, FunctionInfo]]:
    """What the same-module function `call` reaches returns (None aside), with that function."""
    target = model._called_function(call, fn)
    if target is None:
        return []
    return [
        (ret.node.value, target) for ret in target.returns if ret.node.value is not None and not _is_none(ret.node.value)
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


def stream_key(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo | None, _depth: int = 0) -> str | None:
    """Which stream an expression names, as a key two expressions share when they name the same
    stream: "<current>", "<default>", "self.alt_stream", "self.streams[]", "local:f:name",
    "global:name"; a local assigned once from a keyed expression takes that key."""
    if isinstance(expr, cst.Call):
        q = model.qualname(expr.func)
        if q in CURRENT_STREAM:
            return "<current>"
        if q == _DEFAULT_STREAM:
            return "<default>"
        if _depth < 4:
            keys = {stream_key(model, value, target, _depth + 1) for value, target in _returned_values(model, expr, fn)}
            key = keys.pop() if len(keys) == 1 else None
            if key is not None and not key.startswith(("local:", "self.")):
                return key  # `get_side_stream()` returning a module global
        return None
    if isinstance(expr, cst.Name):
        if fn is not None and expr.value in fn.global_names:
            return f"global:{expr.value}"
        if fn is not None and not is_parameter(fn, expr.value) and _depth < 4:
            values = [v for v in values_assigned(model, fn, expr.value) if not _is_none(v)]
            keys = {stream_key(model, v, fn, _depth + 1) for v in values}
            if len(keys) == 1 and None not in keys:
                return keys.pop()
            if values:
                return f"local:{fn.qualname}:{expr.value}"
        if fn is not None and (is_parameter(fn, expr.value) or expr.value in fn.locals):
            return f"local:{fn.qualname}:{expr.value}"
        return f"global:{expr.value}"
    if isinstance(expr, cst.Subscript):
        inner = storage_of(expr.value) if not isinstance(expr.value, cst.Subscript) else None
        attr = self_attribute(expr.value)
        if attr is not None:
            return f"self.{attr}[]"
        return f"{inner}[]" if inner else None
    return storage_of(expr) or dotted_name(expr)


def _is_current_side(role: StreamRole) -> bool:
    return role in (StreamRole.CURRENT, StreamRole.DEFAULT)


def recorded_on_current_before(model: ModuleModel, fn: FunctionInfo, event: cst.BaseExpression, order: int) -> bool:
    """`ev.record()` (or `ev.record(cur)`, `ev = cur.record_event()`) on the current stream,
    earlier in the same call and outside any `with torch.cuda.stream(side)`."""
    name = local_name(event) if storage_of(event) is None else None
    key = storage_of(event) or name
    if key is None:
        return False
    for site in fn.calls:
        if site.order >= order:
            continue
        if site.method == "record" and site.receiver is not None and (storage_of(site.receiver) or local_name(site.receiver)) == key:
            if site.node.args:
                if _is_current_side(stream_role(model, site.node.args[0].value, fn)):
                    return True
                continue
            if all(_is_current_side(stream_role(model, s.stream, fn)) for s in site.stream_scopes):
                return True
        if site.method == "record_event" and site.receiver is not None and _is_current_side(stream_role(model, site.receiver, fn)):
            if site.node.args and (storage_of(site.node.args[0].value) or local_name(site.node.args[0].value)) == key:
                return True
            if name is not None and any(
                a.value is site.node and any(isinstance(t, cst.Name) and t.value == name for t in a.targets)
                for a in fn.assignments
            ):
                return True
    return False


def fork_key(model: ModuleModel, site: CallSite, strict: bool = False) -> str | None:
    """The key of the stream a call forks: `side.wait_stream(x)` or `side.wait_event(ev)`.
    Lenient (default): any such wait makes `side` forked - used where a missing fork is the finding.
    Strict: only a fork from the current stream (`x` is the current/default stream, `ev` was
    recorded on it earlier in the call) - used where the fork itself is the finding."""
    fn = site.function
    if site.method == "wait" and site.receiver is not None and len(site.node.args) <= 1:
        # `ev.wait(s)`, or `ev.wait()` under `with torch.cuda.stream(s)`: s waits on ev
        if not is_event(model, site.receiver, fn):
            return None
        target = site.node.args[0].value if site.node.args else (
            site.stream_scopes[-1].stream if site.stream_scopes else None
        )
        if target is None or _is_current_side(stream_role(model, target, fn)):
            return None
        if strict and not recorded_on_current_before(model, fn, site.receiver, site.order):
            return None
        return stream_key(model, target, fn)
    if site.method not in ("wait_stream", "wait_event") or site.receiver is None or not site.node.args:
        return None
    if strict:
        if _is_current_side(stream_role(model, site.receiver, fn)):
            return None
        arg = site.node.args[0].value
        if site.method == "wait_stream" and not _is_current_side(stream_role(model, arg, fn)):
            return None
        if site.method == "wait_event" and not recorded_on_current_before(model, fn, arg, site.order):
            return None
    return stream_key(model, site.receiver, fn)


def _carries_key(fn: FunctionInfo, callee: FunctionInfo, key: str) -> bool:
    """Whether a stream key means the same stream in a callee (`self.` keys within one class,
    globals and the current/default streams everywhere)."""
    if key.startswith("self."):
        return callee.cls is not None and callee.cls is fn.cls
    return not key.startswith("local:")


def _callees(model: ModuleModel, fn: FunctionInfo) -> list[tuple[CallSite, FunctionInfo]]:
    out = []
    for site in fn.calls:
        target = model._called_function(site.node, fn)
        if target is not None and target is not fn:
            out.append((site, target))
    return out


def _anywhere(
    model: ModuleModel, fn: FunctionInfo, key: str, test: Callable[[CallSite], bool], seen: set[int]
) -> bool:
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    if any(test(site) for site in fn.calls):
        return True
    return any(
        _carries_key(fn, callee, key) and _anywhere(model, callee, key, test, seen) for _, callee in _callees(model, fn)
    )


def forked_before(model: ModuleModel, fn: FunctionInfo, key: str, order: int) -> bool:
    """`key` is forked (leniently, see `fork_key`) earlier in this call: directly, in a
    same-module function called earlier, or by a same-module caller before it calls us."""

    def forks(site: CallSite) -> bool:
        return fork_key(model, site) == key

    return _in_this_call(
        model, fn, key, order, forks, before=True, also=lambda site: _handed_to_helper(model, site, key)
    )


def _in_this_call(
    model: ModuleModel,
    fn: FunctionInfo,
    key: str,
    order: int,
    test: Callable[[CallSite], bool],
    *,
    before: bool,
    also: Callable[[CallSite], bool] | None = None,
    where: Callable[[CallSite], bool] | None = None,
) -> bool:
    """`test` holds for a call site of this call before (or after) `order`: here, in a
    same-module function called then, or in a same-module caller before (after) it calls us.
    `where` narrows the call sites of `fn` itself that count (and the calls into helpers)."""
    for site in fn.calls:
        if (site.order >= order) if before else (site.order <= order):
            continue
        if where is not None and not where(site):
            continue
        if test(site) or (also is not None and also(site)):
            return True
        if _callee_satisfies(model, fn, site, fn, key, test):
            return True
    return _entered_after(model, fn, key, test, set(), before=before)


def _callee_satisfies(
    model: ModuleModel,
    caller: FunctionInfo,
    site: CallSite,
    origin: FunctionInfo,
    key: str,
    test: Callable[[CallSite], bool],
) -> bool:
    """`site` calls a same-module function (other than `origin`) that receives stream `key` and
    satisfies `test` somewhere inside."""
    target = model._called_function(site.node, caller)
    return (
        target is not None
        and target is not origin
        and _carries_key(caller, target, key)
        and _anywhere(model, target, key, test, set())
    )


# calls that take a stream argument without forking it
_NOT_FORKING_METHODS = frozenset({"record_stream", "wait_stream", "wait_event", "record", "record_event", "synchronize"})


def _handed_to_helper(model: ModuleModel, site: CallSite, key: str) -> bool:
    """The stream is passed to a function offlint cannot see (`mhc.fork_stats_stream(s)`,
    `utils.fork(s)`), which may fork it: counted as a fork, so that a missing fork is only
    reported when none can have happened."""
    if site.method in _NOT_FORKING_METHODS or (site.callee or "").startswith("torch."):
        return False
    if model._called_function(site.node, site.function) is not None:
        return False  # same-module: looked into instead
    fn = site.function
    return any(stream_key(model, arg.value, fn) == key for arg in site.node.args if not isinstance(arg.value, cst.Call))


def _entered_after(
    model: ModuleModel,
    fn: FunctionInfo,
    key: str,
    test: Callable[[CallSite], bool],
    seen: set[int],
    before: bool,
) -> bool:
    """A same-module caller of `fn` satisfies `test` before (or after) the call, directly or in
    its own callers."""
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    for caller in model.functions:
        if caller is fn or not _carries_key(caller, fn, key):
            continue
        for site in caller.calls:
            if model._called_function(site.node, caller) is not fn:
                continue
            window = [s for s in caller.calls if (s.order < site.order if before else s.order > site.order)]
            if any(test(s) for s in window):
                return True
            if any(_callee_satisfies(model, caller, other, fn, key, test) for other in window):
                return True
            if _entered_after(model, caller, key, test, seen, before):
                return True
    return False


def is_join_of(model: ModuleModel, site: CallSite, key: str) -> bool:
    """A call that makes the current stream (or the host) wait for work on stream `key`:
    `x.wait_stream(side)`, any event wait (`x.wait_event(ev)`, `ev.wait()`, `ev.synchronize()`),
    `side.synchronize()`, `torch.cuda.synchronize()`."""
    fn = site.function
    if site.callee in DEVICE_SYNCS:
        return True
    if site.method == "wait_stream" and site.node.args:
        return stream_key(model, site.node.args[0].value, fn) == key
    if site.method == "wait_event" and site.node.args:
        return stream_key(model, site.receiver, fn) != key if site.receiver is not None else True
    if site.method in ("wait", "synchronize") and site.receiver is not None:
        if is_event(model, site.receiver, fn):
            return True
        return site.method == "synchronize" and stream_key(model, site.receiver, fn) == key
    return False


def joined_after(model: ModuleModel, fn: FunctionInfo, key: str, order: int, fork: CallSite | None = None) -> bool:
    """Stream `key` is joined later in the same call: here, in a same-module function called
    later, or by a same-module caller after it calls us. Given the `fork` call, the joins in
    `fn` must hold on every capturing path the fork ran on (`_uncovered_conditions`): the last
    step of a ring joining under `if i == last:` leaves every other step's fork open."""

    def joins(site: CallSite) -> bool:
        return is_join_of(model, site, key)

    if fork is None:
        return _in_this_call(model, fn, key, order, joins, before=False)
    extra: list[list[tuple[cst.BaseExpression, bool]]] = []
    for site in fn.calls:
        if site.order <= order:
            continue
        if joins(site) or _callee_satisfies(model, fn, site, fn, key, joins):
            missing = _uncovered_conditions(model, site, fork)
            if missing is not None:
                extra.append(missing)
    if any(not missing for missing in extra):
        return True
    # two joins on the two branches of one more test (`if x: join` ... `if not x: join`)
    singles = [missing[0] for missing in extra if len(missing) == 1]
    if any(
        a[1] != b[1] and same_code(a[0], b[0]) for i, a in enumerate(singles) for b in singles[i + 1 :]
    ):
        return True
    return _entered_after(model, fn, key, joins, set(), before=False)


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


def _uncovered_conditions(
    model: ModuleModel, site: CallSite, earlier: CallSite
) -> list[tuple[cst.BaseExpression, bool]] | None:
    """The conditions `site` (later in the same function) runs under that do not hold on every
    capturing path `earlier` ran on: [] when `site` runs whenever `earlier` did and a capture
    is on; None when it never runs while capturing (eager-only: a guard, an early return)."""
    if not site.context.may_capture:
        return None
    held = condition_atoms(earlier.guards)
    missing = []
    for test, holds in condition_atoms(site.guards):
        if any(h == holds and same_code(t, test) for t, h in held):
            continue
        decided = model.capture_condition(test, site.function)
        if decided is not None:
            if (decided is Context.CAPTURING) == holds:
                continue  # `if capturing: join` - on every capturing path
            return None
        missing.append((test, holds))
    return missing


def capture_aware_joins(model: ModuleModel) -> list[FunctionInfo]:
    """Functions that join side-stream work in a way that knows about capture: they test
    `is_current_stream_capturing()` (or a flag from it) or read capture bookkeeping
    (`self._captured`), and make the current stream wait (`cur.wait_stream(side)`,
    `cur.wait_event(ev)`, `ev.wait()`) somewhere that may run while capturing. Asked by the
    module index and OFL103 alike: found once per model."""
    if model.capture_aware_joins is not None:
        return model.capture_aware_joins
    out: list[FunctionInfo] = []
    for fn in model.functions:
        if not (fn.tests_capture or capture_bookkeeping_tests(model, fn)):
            continue
        for site in fn.calls:
            if not site.context.may_capture:
                continue
            if site.method == "wait_stream" and site.receiver is not None and site.node.args:
                if _is_current_side(stream_role(model, site.receiver, fn)):
                    out.append(fn)
                    break
            elif site.method == "wait_event" or (
                site.method == "wait" and site.receiver is not None and is_event(model, site.receiver, fn)
            ):
                out.append(fn)
                break
    model.capture_aware_joins = out
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
        guards = other.guards
        if len(guards) <= len(site.guards) and all(
            a[0] is b[0] and a[1] == b[1] for a, b in zip(guards, site.guards[: len(guards)], strict=True)
        ):
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


def switches_stream(model: ModuleModel, scope: StreamScope) -> bool:
    """Whether `with torch.cuda.stream(s)` really moves work to another stream: not
    `stream(None)` (a no-op context), not a conditional that may be None, not
    `stream(current_stream())`."""
    stream = scope.stream
    if isinstance(stream, cst.Name) and stream.value == "None":
        return False
    if isinstance(stream, cst.IfExp | cst.BooleanOperation):
        return False
    return not (isinstance(stream, cst.Call) and model.qualname(stream.func) in CURRENT_STREAM)


def innermost_side_scope(model: ModuleModel, scopes: tuple[StreamScope, ...]) -> StreamScope | None:
    """The innermost stream context around some code, when it really switches streams."""
    if not scopes or not switches_stream(model, scopes[-1]):
        return None
    return scopes[-1]


# ---------------------------------------------------------------- OFL204: where a stream was taken


def current_stream_scope(
    model: ModuleModel,
    fn: FunctionInfo,
    expr: cst.BaseExpression,
    order: int,
    scopes: tuple[StreamScope, ...],
    _depth: int = 0,
) -> StreamScope | None:
    """The side-stream block (`with torch.cuda.stream(side):`) inside which the stream value
    `expr` - evaluated in `fn` at `order`, under `scopes` - was taken as the current stream, so
    that it *is* `side`. Followed through the local it was stored in (`consumer =
    torch.cuda.current_stream() if record else None`), through a parameter to the arguments
    same-module callers pass, and - where `fn` itself opens no stream block - to the blocks its
    same-module callers call it in."""
    if _depth > 5:
        return None
    if isinstance(expr, cst.Call):
        if model.qualname(expr.func) not in CURRENT_STREAM:
            return None
        if scopes:
            return innermost_side_scope(model, scopes)
        return entry_side_scope(model, fn)
    if isinstance(expr, cst.IfExp):
        return current_stream_scope(model, fn, expr.body, order, scopes, _depth + 1) or current_stream_scope(
            model, fn, expr.orelse, order, scopes, _depth + 1
        )
    if not isinstance(expr, cst.Name):
        return None
    name = expr.value
    bindings = [
        assign
        for assign in fn.assignments
        if assign.order < order and any(isinstance(t, cst.Name) and t.value == name for t in assign.targets)
    ]
    if bindings:
        # bindings are not ordered by path (`if overlap: s = self.side else: s = current_stream()`):
        # the value is the current stream of a side block only when every binding says so
        found: StreamScope | None = None
        for binding in bindings:
            if binding.value is None:
                return None
            found = current_stream_scope(model, fn, binding.value, binding.order, binding.stream_scopes, _depth + 1)
            if found is None:
                return None
        return found
    if not is_parameter(fn, name):
        return None
    for site in model.callers_of(fn):
        arg = argument_for(site, fn, name)
        if arg is not None:
            found = current_stream_scope(model, site.function, arg, site.order, site.stream_scopes, _depth + 1)
            if found is not None:
                return found
    return None


def entry_side_scope(model: ModuleModel, fn: FunctionInfo, _seen: set[int] | None = None) -> StreamScope | None:
    """A side-stream block some same-module caller calls `fn` in (directly, or through its own
    callers): there `fn`'s `torch.cuda.current_stream()` is the side stream."""
    seen = _seen if _seen is not None else set()
    if id(fn) in seen or len(seen) > 16:
        return None
    seen.add(id(fn))
    for site in model.callers_of(fn):
        if site.stream_scopes:
            found = innermost_side_scope(model, site.stream_scopes)
        else:
            found = entry_side_scope(model, site.function, seen)
        if found is not None:
            return found
    return None


def argument_for(site: CallSite, fn: FunctionInfo, name: str) -> cst.BaseExpression | None:
    """The expression a call site passes for `fn`'s parameter `name` (`self` is bound by
    `self.m(...)`); None when it passes none (a default, `*args`)."""
    bound = fn.cls is not None and fn.parent is None and isinstance(site.node.func, cst.Attribute)
    return call_argument(site.node, fn.node.params, name, bound)


# ---------------------------------------------------------------- OFL101/OFL202: external events


def held_only_when_forked(expr: cst.BaseExpression, fn: FunctionInfo) -> bool:
    """`self._pending` (or a local read from it) where every assignment of that attribute in the
    class stores None or a stream the assigning function forked just before
    (`alt.wait_stream(cur); self._pending = alt`): a non-None value is a fork handle, so a join or
    side-stream work through it follows a fork made earlier in the same forward."""
    attr = self_attribute(expr)
    if attr is None and isinstance(expr, cst.Name):
        sources = [a.value for a in fn.assignments if any(_is_name(t, expr.value) for t in a.targets)]
        if len(sources) != 1 or sources[0] is None:
            return False
        attr = self_attribute(sources[0])
    if attr is None or fn.cls is None:
        return False
    stores = [
        (method, assign)
        for method in fn.cls.methods.values()
        for assign in method.assignments
        if any(self_attribute(t) == attr for t in assign.targets)
    ]
    handed = False
    for method, assign in stores:
        value = assign.value
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        if value is None or not any(
            site.order < assign.order
            and site.method in ("wait_stream", "wait_event")
            and site.receiver is not None
            and same_code(site.receiver, value)
            for site in method.calls
        ):
            return False
        handed = True
    return handed


def fork_handed_to_a_join(site: CallSite) -> bool:
    """`side.wait_stream(cur)` followed in the same call by `self._pending = side`, where a
    method of the class joins through `self._pending` (a fork handle, `held_only_when_forked`):
    the join is the handle's reader, called later in the same forward."""
    fn, side = site.function, site.receiver
    if side is None or fn.cls is None:
        return False
    for assign in fn.assignments:
        if assign.order <= site.order or assign.value is None or not same_code(assign.value, side):
            continue
        for target in assign.targets:
            attr = self_attribute(target)
            if attr is None or not held_only_when_forked(target, fn):
                continue
            for method in fn.cls.methods.values():
                for join in method.calls:
                    if join.method != "wait_stream" or len(join.node.args) != 1:
                        continue
                    joined = join.node.args[0].value
                    if self_attribute(joined) == attr or held_only_when_forked(joined, method):
                        return True
    return False


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name




def handed_to_host_waiter(model: ModuleModel, value: cst.BaseExpression, name: str) -> bool:
    """`return _Pending(ready_event=ev)` where the same-module class `_Pending` keeps `ev` and only
    ever queries it from the host (`self._ready.synchronize()`): whoever gets the object waits
    on the CPU, so no stream is joined back by the hand-off."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
        return False
    cls = next((c for c in model.classes if c.name == value.func.value), None)
    init = cls.methods.get("__init__") if cls is not None else None
    if cls is None or init is None:
        return False
    params = [p.name.value for p in (*init.node.params.posonly_params, *init.node.params.params)][1:]
    param = None
    for index, arg in enumerate(value.args):
        if _is_name(arg.value, name):
            param = arg.keyword.value if arg.keyword is not None else (params[index] if index < len(params) else None)
    if param is None:
        return False
    held = {
        self_attribute(target)
        for assign in init.assignments
        if assign.value is not None and _is_name(assign.value, param)
        for target in assign.targets
    } - {None}
    if not held:
        return False
    uses = [
        site
        for method in cls.methods.values()
        for site in method.calls
        if (site.receiver is not None and self_attribute(site.receiver) in held)
        or any(self_attribute(arg.value) in held for arg in site.node.args)
    ]
    return bool(uses) and all(
        site.receiver is not None and self_attribute(site.receiver) in held and site.method in EVENT_HOST_METHODS
        for site in uses
    )
