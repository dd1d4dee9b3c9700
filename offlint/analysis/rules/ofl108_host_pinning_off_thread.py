"""OFL108 host-pinning-off-thread: pinning host memory on another thread while a CUDA graph may
be captured in the default "global" mode.

A capture in "global" mode forbids unsafe CUDA calls on *every* thread of the process while it
runs. Pinning (`pin_memory()`, a factory with `pin_memory=True`, `cudaHostRegister`) is one: done
by a background thread during a capture, the pin fails (900) and the capture is invalidated (901
at its end). The rule finds the functions a module runs on other threads (`threading.Thread`
targets and subclasses' `run`, executor `submit`/`map`, `asyncio.to_thread`, `run_in_executor`,
and the same-module functions they call) and reports the pinning calls in them when the module
also captures in global mode (and does not join the thread before any capture can begin), or
starts the thread from capture-reachable code.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from offlint.analysis.facts import global_values, local_name, storage_of
from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import is_true, keyword, self_attribute
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import CallSite, FunctionInfo
from offlint.analysis.reachability import finding_reach
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.syntax import walk
from offlint.analysis.torch_api import GRAPH_CONTEXTS, GRAPHED_CALLABLES, SEGMENTED_GRAPH_CONTEXTS
from offlint.diagnostics import Confidence

_THREADS = frozenset({"threading.Thread"})
_TIMERS = frozenset({"threading.Timer"})
_TO_THREAD = frozenset({"asyncio.to_thread"})
# pinning entry points of the CUDA runtime and driver APIs (by method or last name)
_PINNING_APIS = frozenset({"cudaHostRegister", "cudaHostAlloc", "cudaMallocHost", "cuMemHostRegister", "cuMemHostAlloc"})
# tensor methods that allocate a new tensor and take `pin_memory=`
_NEW_METHODS = frozenset({"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "new_empty_strided"})
# calls that take `pin_memory=` without pinning on the calling thread
_NOT_FACTORIES = ("torch.utils.data",)
_SAFE_MODES = ("thread_local", "relaxed")


@dataclass(frozen=True)
class _Start:
    """Where a function is handed to another thread."""

    site: CallSite | None  # the `Thread(...)` / `submit(...)` / `map(...)` call; None: unknown
    target: FunctionInfo | cst.Lambda
    how: str  # for the message: "started by `threading.Thread(target=...)` in `f`"


class HostPinningOffThread(Rule):
    code = "OFL108"
    # a literal: the prefilter reads it without importing the rule (`_PINNING_APIS` and "pin_memory")
    tokens = ("pin_memory", "cudaHostRegister", "cudaHostAlloc", "cudaMallocHost", "cuMemHostRegister", "cuMemHostAlloc")

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        starts = list(_thread_starts(model))
        if not starts:
            return
        capture = _global_capture(model)
        safe_only = capture is None and any(_is_capture_point(site) for site in model.all_calls())
        reported: set[int] = set()
        for start in starts:
            # the finding is as sure as its evidence: the starter's reach, or a capture in this module
            if start.site is not None and _started_from_capture(start.site, safe_only):
                why = f"`{start.site.function.qualname}`, which starts the thread, may run during a capture"
                confidence = finding_reach(model, start.site.node, True)[0]
            elif capture is not None and not _joined_before_capture(model, start):
                why = f"this module captures CUDA graphs in global mode (`{code_of(capture.node, model)}` in `{capture.function.qualname}`)"
                confidence = Confidence.HIGH
            else:
                continue
            for fn, call in _pinning_calls(model, start.target, start.site.function if start.site is not None else None):
                if id(call) in reported:
                    continue
                reported.add(id(call))
                where = f"`{fn.qualname}`" if fn is not None else "a lambda"
                yield Finding(
                    call,
                    {"call": code_of(call, model), "function": where, "thread": start.how, "capture": why},
                    confidence=confidence,
                )


# ---------------------------------------------------------------- what runs on another thread


def _thread_starts(model: ModuleModel) -> Iterator[_Start]:
    for site in model.all_calls():
        fn = site.function
        callee = site.callee
        target_expr: cst.BaseExpression | None = None
        if callee in _THREADS:
            target_expr = keyword(site.node, "target") or _positional(site.node, 1)
        elif callee in _TIMERS:
            target_expr = keyword(site.node, "function") or _positional(site.node, 1)
        elif callee in _TO_THREAD:
            target_expr = _positional(site.node, 0)
        elif site.method == "run_in_executor":
            target_expr = _positional(site.node, 1)
        elif site.method in ("submit", "map") and site.receiver is not None:
            pool = _pool_kind(model, site.receiver, fn)
            # `submit` of an executor made elsewhere counts; `map` is too common a name for that
            if pool == "thread" or (pool is None and site.method == "submit"):
                target_expr = keyword(site.node, "fn") or _positional(site.node, 0)
        if target_expr is None:
            continue
        target: FunctionInfo | cst.Lambda | None
        if isinstance(target_expr, cst.Lambda):
            target = target_expr
        else:
            target = model._function_named(target_expr, fn)
        if target is None:
            continue
        yield _Start(site, target, f"started by `{code_of(site.node, model)}` in `{fn.qualname}`")
    for cls in model.classes:  # `class Pinner(threading.Thread): def run(self): ...`
        run = cls.methods.get("run")
        if run is None:
            continue
        if any(model.qualname(base.value) in _THREADS for base in cls.node.bases):
            yield _Start(None, run, f"the `run` of `threading.Thread` subclass `{cls.name}`")


def _positional(call: cst.Call, index: int) -> cst.BaseExpression | None:
    passed = [arg for arg in call.args if arg.keyword is None]
    if any(arg.star for arg in passed[: index + 1]) or index >= len(passed):
        return None
    return passed[index].value


def _pool_kind(model: ModuleModel, receiver: cst.BaseExpression, fn: FunctionInfo) -> str | None:
    """"thread" / "process" for an executor made in this module (`ThreadPoolExecutor(...)`,
    `ProcessPoolExecutor(...)`, `multiprocessing.Pool(...)`), None when it cannot be told."""
    kinds = {_pool_of_constructor(model, value) for value in _made_from(model, receiver, fn)}
    if len(kinds) == 1:
        return kinds.pop()
    return "process" if "process" in kinds else None


def _pool_of_constructor(model: ModuleModel, value: cst.BaseExpression) -> str | None:
    if not isinstance(value, cst.Call):
        return None
    name = model.qualname(value.func) or dotted_name(value.func) or ""
    last = name.rsplit(".", 1)[-1]
    if last in ("ThreadPoolExecutor", "ThreadPool"):
        return "thread"
    if last in ("ProcessPoolExecutor", "Pool") or "ProcessPool" in last:
        return "process"
    return None


def _made_from(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> list[cst.BaseExpression]:
    """The values an executor expression is bound to: the expression itself when it is a call,
    assignments and `with ... as name` of a local (also in enclosing functions), `self.x = ...`
    in the class's methods, module-level assignments of a global."""
    if isinstance(expr, cst.Call):
        return [expr]
    attr = self_attribute(expr)
    if attr is not None:
        if fn.cls is None:
            return []
        return [
            a.value
            for other in fn.cls.methods.values()
            for a in other.assignments
            if a.value is not None and any(self_attribute(t) == attr for t in a.targets)
        ]
    if not isinstance(expr, cst.Name):
        return []
    name = expr.value
    scope: FunctionInfo | None = fn
    while scope is not None:
        found = [
            a.value
            for a in scope.assignments
            if a.value is not None and any(isinstance(t, cst.Name) and t.value == name for t in a.targets)
        ]
        found.extend(_with_bindings(scope, name))
        if found:
            return found
        scope = scope.parent
    return global_values(model, name)


def _with_bindings(fn: FunctionInfo, name: str) -> list[cst.BaseExpression]:
    found: list[cst.BaseExpression] = []
    for node in walk(fn.node.body):
        if isinstance(node, cst.With):
            for item in node.items:
                if item.asname is not None and isinstance(item.asname.name, cst.Name) and item.asname.name.value == name:
                    found.append(item.item)
    return found


# ---------------------------------------------------------------- pinning calls


def _pinning_calls(
    model: ModuleModel, target: FunctionInfo | cst.Lambda, scope: FunctionInfo | None
) -> Iterator[tuple[FunctionInfo | None, cst.Call]]:
    """Pinning calls in the function run on the thread and in the same-module functions it calls."""
    todo: list[FunctionInfo] = []
    if isinstance(target, cst.Lambda):
        for node in walk(target.body):
            if isinstance(node, cst.Call):
                if _pins(model, node, None):
                    yield None, node
                called = model._called_function(node, scope)  # `lambda: self._pin()`
                if called is not None:
                    todo.append(called)
    else:
        todo.append(target)
    seen: set[int] = set()
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        for site in fn.calls:
            if _pins(model, site.node, fn):
                yield fn, site.node
            called = model._called_function(site.node, fn)
            if called is not None:
                todo.append(called)


def _pins(model: ModuleModel, call: cst.Call, fn: FunctionInfo | None) -> bool:
    func = call.func
    method = func.attr.value if isinstance(func, cst.Attribute) else None
    if method == "pin_memory":
        return True
    name = model.qualname(func) or dotted_name(func) or ""
    if (method or name.rsplit(".", 1)[-1]) in _PINNING_APIS:
        return True
    pin = keyword(call, "pin_memory")
    if pin is None or (isinstance(pin, cst.Name) and pin.value in ("False", "None")):
        return False
    if fn is not None and model._called_function(call, fn) is not None:
        return False  # a same-module helper: its own body is looked into
    if name.startswith(_NOT_FACTORIES) or name.rsplit(".", 1)[-1] == "DataLoader":
        return False  # pins later, on a thread of its own (not the call's)
    if name.startswith("torch."):
        return True  # `torch.empty(..., pin_memory=True)`, also `pin_memory=flag`: it may pin
    if method in _NEW_METHODS:
        return True
    return is_true(pin)  # a helper of another module, asked to pin


# ---------------------------------------------------------------- when it can overlap a capture


def _global_capture(model: ModuleModel) -> CallSite | None:
    """A capture in this module that runs in the default "global" mode: `torch.cuda.graph(...)`,
    `capture_begin(...)`, a segmented capture, without `capture_error_mode="thread_local"` or
    `"relaxed"`; `make_graphed_callables`."""
    for site in model.all_calls():
        if site.callee in GRAPH_CONTEXTS:
            mode = keyword(site.node, "capture_error_mode") or _positional(site.node, 3)
        elif site.method == "capture_begin":
            mode = keyword(site.node, "capture_error_mode") or _positional(site.node, 1)
        elif _last_name(site.node.func) in SEGMENTED_GRAPH_CONTEXTS:
            mode = keyword(site.node, "capture_error_mode")
        elif site.callee in GRAPHED_CALLABLES:
            mode = None
        else:
            continue
        if not _safe_mode(mode):
            return site
    return None


def _safe_mode(mode: cst.BaseExpression | None) -> bool:
    return isinstance(mode, cst.SimpleString) and mode.evaluated_value in _SAFE_MODES


def _last_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _started_from_capture(site: CallSite, safe_captures_only: bool) -> bool:
    """The thread starts where a capture may be underway: in a capture region, or in code a
    capture reaches (high or medium: any method of a stream-holding class is not enough) - unless
    what reaches it is this module's own captures and they all run in a safe mode."""
    fn = site.function
    if site.in_graph_region:
        return not safe_captures_only
    if not (fn.reachable and fn.confidence in (Confidence.HIGH, Confidence.MEDIUM) and site.context.may_capture):
        return False
    return not (safe_captures_only and _reached_from_own_capture(fn))


def _reached_from_own_capture(fn: FunctionInfo) -> bool:
    """`fn` is capture-reachable because a capture region of this module calls it (directly or
    through the functions it calls), as its reachability chain says."""
    root, seen = fn, {id(fn)}
    while root.reachable_via is not None and id(root.reachable_via) not in seen:
        root = root.reachable_via
        seen.add(id(root))
    return root.reachable_reason.startswith("called inside a CUDA graph capture region")


def _is_capture_point(site: CallSite) -> bool:
    return (
        site.in_graph_region
        or site.callee in GRAPH_CONTEXTS
        or site.callee in GRAPHED_CALLABLES
        or site.method == "capture_begin"
        or _last_name(site.node.func) in SEGMENTED_GRAPH_CONTEXTS
    )


def _captures_within(model: ModuleModel, site: CallSite, seen: set[int]) -> bool:
    """The call may capture a graph: it is a capture, a same-module function that captures (or
    calls one that does), or a method of another module named like one (`capture_model()`)."""
    if _is_capture_point(site):
        return True
    called = model._called_function(site.node, site.function)
    if called is None:
        name = site.method or _last_name(site.node.func) or ""
        return "captur" in name.lower() and name != "is_current_stream_capturing"
    if id(called) in seen:
        return False
    seen.add(id(called))
    return any(_captures_within(model, other, seen) for other in called.calls)


def _joined_before_capture(model: ModuleModel, start: _Start) -> bool:
    """The thread is waited for in the function that starts it, and no capture can begin
    between the start and that wait: `t.join()`, `future.result()`, `executor.shutdown()`, the
    end of `with ThreadPoolExecutor() as ex:`, an awaited `to_thread`, a consumed `map`."""
    site = start.site
    if site is None:
        return False
    fn = site.function
    if id(site.node) in _run_awaited_or_consumed(site):
        return True  # waited for in the same statement
    end = _join_order(model, fn, site)
    if end is None:
        return False
    return not any(
        site.order < other.order < end and _captures_within(model, other, set()) for other in fn.calls
    )


def _run_awaited_or_consumed(site: CallSite) -> set[int]:
    """Calls of the statement holding `site` whose result is awaited or iterated in place
    (`await asyncio.to_thread(f)`, `list(ex.map(f, xs))`, `for r in ex.map(f, xs):`)."""
    found: set[int] = set()
    for node in walk(site.statement):
        if isinstance(node, cst.Await):
            found.add(id(node.expression))
        elif isinstance(node, cst.Call) and dotted_name(node.func) in ("list", "tuple", "set", "sorted", "sum", "dict", "any", "all"):
            found.update(id(arg.value) for arg in node.args)
        elif isinstance(node, cst.For | cst.CompFor):
            found.add(id(node.iter))
    return found


def _join_order(model: ModuleModel, fn: FunctionInfo, site: CallSite) -> int | None:
    """The order of the first wait for the thread or task `site` starts, later in `fn`."""
    holders = _holders(fn, site)
    waits = []
    for other in fn.calls:
        if other.order <= site.order:
            continue
        if other.method in ("join", "result", "exception") and other.receiver is not None:
            if _key(other.receiver) in holders:
                waits.append(other.order)
        elif other.method == "shutdown" and site.receiver is not None and other.receiver is not None:
            if _key(other.receiver) == _key(site.receiver) and not _passes_false(other.node, "wait"):
                waits.append(other.order)
        elif (other.method == "wait" or (other.callee or "").endswith(("futures.wait", "as_completed"))) and any(
            _key(arg.value) in holders for arg in other.node.args
        ):
            waits.append(other.order)
    executor_end = _executor_block_end(model, fn, site)
    if executor_end is not None:
        waits.append(executor_end)
    return min(waits) if waits else None


def _holders(fn: FunctionInfo, site: CallSite) -> set[str]:
    """Names that hold the thread/future `site` makes: `t = Thread(...)`, `self._t = ...`,
    `futs = [ex.submit(...) ...]`, `futs.append(ex.submit(...))`, and the loop variables that
    iterate over such a container in `fn` (`for t in threads: t.join()`)."""
    holders: set[str] = set()
    for a in fn.assignments:
        if a.value is not None and any(n is site.node for n in walk(a.value)):
            holders.update(k for k in (_key(t) for t in a.targets) if k is not None)
    for other in fn.calls:
        if (
            other.method in ("append", "add", "extend")
            and other.receiver is not None
            and any(n is site.node for arg in other.node.args for n in walk(arg.value))
        ):
            key = _key(other.receiver)
            if key is not None:
                holders.add(key)
    for node in walk(fn.node.body):
        if isinstance(node, cst.For | cst.CompFor) and _key(node.iter) in holders:
            target = _key(node.target)
            if target is not None:
                holders.add(target)
    return holders


def _key(expr: cst.BaseExpression) -> str | None:
    stored = storage_of(expr)
    return stored if stored is not None else local_name(expr)


def _passes_false(call: cst.Call, name: str) -> bool:
    value = keyword(call, name) or (call.args[0].value if call.args and call.args[0].keyword is None else None)
    return isinstance(value, cst.Name) and value.value == "False"


def _executor_block_end(model: ModuleModel, fn: FunctionInfo, site: CallSite) -> int | None:
    """For a task submitted to the executor of an enclosing `with ThreadPoolExecutor() as ex:`,
    the order just after the block (its exit waits for every task)."""
    if site.receiver is None:
        return None
    receiver = _key(site.receiver)
    for node in walk(fn.node.body):
        if not isinstance(node, cst.With):
            continue
        bound = {
            item.asname.name.value
            for item in node.items
            if item.asname is not None
            and isinstance(item.asname.name, cst.Name)
            and _pool_of_constructor(model, item.item) is not None
        }
        if receiver not in bound:
            continue
        inside = {id(n) for n in walk(node.body)}
        if id(site.node) not in inside:
            continue
        orders = [other.order for other in fn.calls if id(other.node) in inside]
        return max(orders) + 1 if orders else None
    return None
