"""Streams in a function: which one an expression is (current, side, default), where each side
stream is forked from the current one and joined back, along every path and through helper calls,
the stream contexts code runs under, and hand-offs of forks to later joins. OFL102-OFL104, OFL204
and OFL205 ask these."""

from __future__ import annotations

import enum
from collections.abc import Callable

import libcst as cst

from offlint.analysis.capture_tags import capture_bookkeeping_tests
from offlint.analysis.closures import carries_key, sibling_within_call
from offlint.analysis.context import Context
from offlint.analysis.effects import effects_of
from offlint.analysis.facts import (
    argument_for,
    class_assignments,
    condition_atoms,
    global_values,
    is_event,
    is_name,
    is_none,
    is_parameter,
    local_name,
    returned_values,
    storage_of,
    values_assigned,
)
from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import Kind, self_attribute
from offlint.analysis.model import ModuleModel, attribute_stores
from offlint.analysis.program import CallSite, FunctionInfo, StreamScope
from offlint.analysis.syntax import call_argument, parameter_names, same_code
from offlint.analysis.torch_api import (
    CURRENT_STREAM,
    DEVICE_SYNCS,
    EVENT_HOST_METHODS,
)

# name fragments that say "this is the compute stream" (`self.main_stream`, `compute_stream`)
# calls that take a stream argument without forking it
_NOT_FORKING_METHODS = frozenset({"record_stream", "wait_stream", "wait_event", "record", "record_event", "synchronize"})
_CURRENTISH = ("current", "cur_", "main", "compute", "default", "orig", "prev", "caller")
_SIDE_CONSTRUCTORS = frozenset({"torch.cuda.Stream", "torch.cuda.ExternalStream"})
_DEFAULT_STREAM = "torch.cuda.default_stream"


class StreamRole(enum.Enum):
    CURRENT = "current"  # torch.cuda.current_stream(), or a name assigned only from it
    DEFAULT = "default"  # torch.cuda.default_stream()
    SIDE = "side"  # a stream known to be another one: torch.cuda.Stream(), self.alt_stream, ...
    UNKNOWN = "unknown"  # a parameter, a call result, anything else


# name fragments that say "this is the compute stream" (`self.main_stream`, `compute_stream`)
_CURRENTISH = ("current", "cur_", "main", "compute", "default", "orig", "prev", "caller")
_SIDE_CONSTRUCTORS = frozenset({"torch.cuda.Stream", "torch.cuda.ExternalStream"})
_DEFAULT_STREAM = "torch.cuda.default_stream"


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
        roles = {stream_role(model, value, target, _depth + 1) for value, target in returned_values(model, expr, fn)}
        return roles.pop() if len(roles) == 1 else StreamRole.UNKNOWN
    if isinstance(expr, cst.Name):
        if fn is not None and is_parameter(fn, expr.value):
            # a stream every same-module caller hands in: the role the callers' streams have
            handed = fn.handed_args.get(expr.value)
            if not handed:
                return StreamRole.UNKNOWN
            roles = {stream_role(model, arg, caller, _depth + 1) for arg, caller in handed}
            return roles.pop() if len(roles) == 1 else StreamRole.UNKNOWN
        values = [v for v in values_assigned(model, fn, expr.value) if not is_none(v)]
        if not values:
            values = [v for v in global_values(model, expr.value) if not is_none(v)]
            if not values:
                return StreamRole.UNKNOWN
        roles = {stream_role(model, v, fn, _depth + 1) for v in values}
        return roles.pop() if len(roles) == 1 else StreamRole.UNKNOWN
    node = expr.value if isinstance(expr, cst.Subscript) else expr
    attr = self_attribute(node)
    if attr is None or fn is None or fn.cls is None:
        return StreamRole.UNKNOWN
    values = [v for v in values_assigned(model, fn, f"self.{attr}") if not is_none(v)]
    roles = {stream_role(model, v, fn, _depth + 1) for v in values} if node is expr else set()
    if roles == {StreamRole.CURRENT} and _saved_elsewhere(model, fn, attr):
        # `self.s = torch.cuda.current_stream()` at construction: the stream current *then*, one
        # fixed stream; under a capture it is not the capture stream
        return StreamRole.SIDE
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


def _saved_elsewhere(model: ModuleModel, fn: FunctionInfo, attr: str) -> bool:
    """`self.attr` is stored only by other functions than `fn` (its constructor, a set-up
    method), never by `fn` itself: `fn` reads a value saved by an earlier call."""
    assert fn.cls is not None
    stores = [store for holder in model.ancestry(fn.cls) for store in attribute_stores(holder, attr)]
    return bool(stores) and all(store_fn is not fn and store_fn is not fn.parent for store_fn, _ in stores)


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
            keys = {stream_key(model, value, target, _depth + 1) for value, target in returned_values(model, expr, fn)}
            key = keys.pop() if len(keys) == 1 else None
            if key is not None and not key.startswith(("local:", "self.")):
                return key  # `get_side_stream()` returning a module global
        return None
    if isinstance(expr, cst.Name):
        if fn is not None and expr.value in fn.global_names:
            return f"global:{expr.value}"
        if fn is not None and not is_parameter(fn, expr.value) and _depth < 4:
            values = [v for v in values_assigned(model, fn, expr.value) if not is_none(v)]
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


def _callees(model: ModuleModel, fn: FunctionInfo) -> list[tuple[CallSite, FunctionInfo]]:
    out = []
    for site in fn.calls:
        target = model._called_function(site.node, fn)
        if target is not None and target is not fn:
            out.append((site, target))
    return out


# a test of one call site against a stream key (the key as the site's function names it)
KeyedTest = Callable[[CallSite, str], bool]


def keys_in_callee(model: ModuleModel, caller: FunctionInfo, site: CallSite, callee: FunctionInfo, key: str) -> list[str]:
    """What stream `key` of `caller` is called inside `callee` when `site` calls it: the same key
    where it means the same stream there (`self.` keys in one class, globals), and the key of each
    parameter the call hands it to (`_fork(self.alt_stream)`: `local:_fork:stream`)."""
    keys = [key] if carries_key(caller, callee, key) else []
    bound = callee.is_method and isinstance(site.node.func, cst.Attribute)
    for name in parameter_names(callee.node.params):
        arg = call_argument(site.node, callee.node.params, name, bound)
        if arg is not None and not isinstance(arg, cst.Call) and stream_key(model, arg, caller) == key:
            keys.append(f"local:{callee.qualname}:{name}")
    return keys


def keys_in_caller(model: ModuleModel, caller: FunctionInfo, site: CallSite, callee: FunctionInfo, key: str) -> list[str]:
    """The other way: what `callee`'s stream `key` is in `caller` at `site` (a parameter's key is
    the key of the argument the call hands it)."""
    keys = [key] if carries_key(caller, callee, key) else []
    prefix = f"local:{callee.qualname}:"
    if key.startswith(prefix) and is_parameter(callee, key[len(prefix):]):
        bound = callee.is_method and isinstance(site.node.func, cst.Attribute)
        arg = call_argument(site.node, callee.node.params, key[len(prefix):], bound)
        found = stream_key(model, arg, caller) if arg is not None else None
        if found is not None:
            keys.append(found)
    return keys


def _anywhere(
    model: ModuleModel, fn: FunctionInfo, key: str, test: KeyedTest, seen: set[tuple[int, str]]
) -> bool:
    if (id(fn), key) in seen:
        return False
    seen.add((id(fn), key))
    if any(test(site, key) for site in fn.calls):
        return True
    return any(
        _anywhere(model, callee, inner, test, seen)
        for site, callee in _callees(model, fn)
        for inner in keys_in_callee(model, fn, site, callee, key)
    )


def forked_before(model: ModuleModel, fn: FunctionInfo, key: str, order: int) -> bool:
    """`key` is forked (leniently, see `fork_key`) earlier in this call: directly, in a
    same-module function called earlier (the stream handed to it or not), or by a same-module
    caller before it calls us."""

    def forks(site: CallSite, key: str) -> bool:
        # a stream handed to a function offlint cannot see may be forked there
        return fork_key(model, site) == key or _handed_to_helper(model, site, key)

    return _in_this_call(model, fn, key, order, forks, before=True)


def _in_this_call(
    model: ModuleModel,
    fn: FunctionInfo,
    key: str,
    order: int,
    test: KeyedTest,
    *,
    before: bool,
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
        if test(site, key):
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
    test: KeyedTest,
) -> bool:
    """`site` calls a same-module function (other than `origin`) that receives stream `key` (as
    the same key, or handed to a parameter) and satisfies `test` somewhere inside."""
    target = model._called_function(site.node, caller)
    if target is None or target is origin:
        return False
    return any(_anywhere(model, target, inner, test, set()) for inner in keys_in_callee(model, caller, site, target, key))


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
    test: KeyedTest,
    seen: set[tuple[int, str]],
    before: bool,
) -> bool:
    """A same-module caller of `fn` satisfies `test` before (or after) the call, directly or in
    its own callers (with the stream as each caller names it)."""
    if (id(fn), key) in seen:
        return False
    seen.add((id(fn), key))
    for site in model.callers_of(fn):  # indexed once per model: not a scan of every call per use
        caller = site.function
        for outer in keys_in_caller(model, caller, site, fn, key):
            window = [s for s in caller.calls if (s.order < site.order if before else s.order > site.order)]
            if any(test(s, outer) for s in window):
                return True
            if any(_callee_satisfies(model, caller, other, fn, outer, test) for other in window):
                return True
            if _entered_after(model, caller, outer, test, seen, before):
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

    def joins(site: CallSite, key: str) -> bool:
        return is_join_of(model, site, key)

    if fork is None:
        return _in_this_call(model, fn, key, order, joins, before=False)
    extra: list[list[tuple[cst.BaseExpression, bool]]] = []
    for site in fn.calls:
        if site.order <= order:
            continue
        if joins(site, key) or _callee_satisfies(model, fn, site, fn, key, joins) or _waits_on_handed_event(model, site):
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


def _waits_on_handed_event(model: ModuleModel, site: CallSite) -> bool:
    """`_block_on(done)` where the same-module helper waits on the event it is handed
    (`def _block_on(ev): torch.cuda.current_stream().wait_event(ev)`): a join at the call."""
    return any(
        effect.site is site and effect.site.method not in ("wait", "wait_event") and effect.method in ("wait", "wait_event")
        for effect in effects_of(model, site.function)
    )


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


def joined_by_sibling(model: ModuleModel, fn: FunctionInfo, key: str) -> bool:
    return sibling_within_call(
        model,
        fn,
        key,
        lambda site: is_join_of(model, site, key)
        or _waits_on_handed_event(model, site)
        or _callee_satisfies(model, site.function, site, fn, key, lambda s, k: is_join_of(model, s, k)),
    )


def forked_by_sibling(model: ModuleModel, fn: FunctionInfo, key: str) -> bool:
    return sibling_within_call(
        model,
        fn,
        key,
        lambda site: fork_key(model, site) == key
        or _callee_satisfies(model, site.function, site, fn, key, lambda s, k: fork_key(model, s) == k),
    )


def held_only_when_forked(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> bool:
    """`self._pending` (or a local read from it) where every assignment of that attribute in the
    class stores None or a stream the assigning function forked just before
    (`alt.wait_stream(cur); self._pending = alt`): a non-None value is a fork handle, so a join or
    side-stream work through it follows a fork made earlier in the same forward."""
    attr = self_attribute(expr)
    if attr is None and isinstance(expr, cst.Name):
        sources = [a.value for a in fn.assignments if any(is_name(t, expr.value) for t in a.targets)]
        if len(sources) != 1 or sources[0] is None:
            return False
        attr = self_attribute(sources[0])
    if attr is None or fn.cls is None:
        return False
    stores = class_assignments(model, fn.cls).get(attr, [])
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


def fork_handed_to_a_join(model: ModuleModel, site: CallSite) -> bool:
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
            if attr is None or not held_only_when_forked(model, target, fn):
                continue
            for method in fn.cls.methods.values():
                for join in method.calls:
                    if join.method != "wait_stream" or len(join.node.args) != 1:
                        continue
                    joined = join.node.args[0].value
                    if self_attribute(joined) == attr or held_only_when_forked(model, joined, method):
                        return True
    return False


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
        if is_name(arg.value, name):
            param = arg.keyword.value if arg.keyword is not None else (params[index] if index < len(params) else None)
    if param is None:
        return False
    held = {
        self_attribute(target)
        for assign in init.assignments
        if assign.value is not None and is_name(assign.value, param)
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
