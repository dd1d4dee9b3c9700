"""OFL107 captured-event-query: host queries of events a capture records; timing events in capture."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.facts import is_event, is_parameter, local_name, storage_of
from offlint.analysis.kinds import is_true, keyword
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import CallSite, FunctionInfo
from offlint.analysis.reachability import run_after_capture_by_driver
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.syntax import child_nodes
from offlint.analysis.torch_api import EVENT_CONSTRUCTORS, EVENT_HOST_METHODS
from offlint.diagnostics import Confidence


def _event_key(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo | None) -> str | None:
    stored = storage_of(expr)
    if stored is not None:
        return stored
    name = local_name(expr)
    if name is None:
        return None
    if fn is None or (
        name not in fn.locals and not is_parameter(fn, name) and name in model.oracle.globals
    ):
        return f"global:{name}"
    return f"local:{fn.qualname}:{name}"


def _timing_not_external(node: cst.Call) -> bool:
    timing = keyword(node, "enable_timing")
    if timing is None and node.args and node.args[0].keyword is None:
        timing = node.args[0].value
    return is_true(timing) and not is_true(keyword(node, "external"))


HIGH = Confidence.HIGH


class CapturedEventQuery(Rule):
    code = "OFL107"
    explains_reachability = True
    tokens = ("query(", "synchronize(", "elapsed_time(", "enable_timing")

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        captured = self._recorded_in_capture(model)
        queried: set[str] = set()  # events whose failing host query is reported itself
        timing: set[str] = set()  # events made with enable_timing=True and not external
        for site in model.all_calls():
            fn = site.function
            if site.method in EVENT_HOST_METHODS and site.receiver is not None:
                if not is_event(model, site.receiver, fn):
                    continue
                events = [site.receiver]
                if site.method == "elapsed_time" and site.node.args:
                    events.append(site.node.args[0].value)
                call = f"{code_of(site.receiver, model)}.{site.method}()"
                if site.hazardous and not run_after_capture_by_driver(model, fn):
                    where = "queries a CUDA event from the host in capture-reachable code"
                    yield Finding(site.node, {"call": call, "where": where})
                    continue
                hit = next((e for e in events if _event_key(model, e, fn) in captured), None)
                if hit is not None:
                    where = f"queries `{code_of(hit, model)}`, an event recorded in capture-reachable code"
                    queried.update(k for e in events if (k := _event_key(model, e, fn)) in captured)
                    key = _event_key(model, hit, fn)
                    yield Finding(site.node, {"call": call, "where": where}, confidence=captured[key] if key else None)
            elif site.callee in EVENT_CONSTRUCTORS and _timing_not_external(site.node):
                timing.update(self._bound_to(model, site))
        for (
            stmt
        ) in model.module.body:  # module-level `START = torch.cuda.Event(enable_timing=True)`
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if not (isinstance(small, cst.Assign) and isinstance(small.value, cst.Call)):
                    continue
                if model.qualname(
                    small.value.func
                ) not in EVENT_CONSTRUCTORS or not _timing_not_external(small.value):
                    continue
                timing.update(k for t in small.targets if (k := _event_key(model, t.target, None)) is not None)
        # a timing event recorded in a capture whose `elapsed_time` is not seen here (read by
        # another module, kept for later): reported where it is recorded, once per hazard
        for site in model.all_calls():
            event = _recorded_event(model, site)
            if event is None or not site.hazardous:
                continue
            key = _event_key(model, event, site.function)
            if key in timing and key not in queried:
                where = (
                    "records a timing event (`enable_timing=True`, no `external=True`) in capture-reachable"
                    " code: `elapsed_time` fails after a replay"
                )
                yield Finding(site.node, {"call": code_of(site.node, model), "where": where})

    @staticmethod
    def _recorded_in_capture(model: ModuleModel) -> dict[str, Confidence]:
        """Events recorded where a capture may run, by key: how surely (the recording site's tier)."""
        keys: dict[str, Confidence] = {}
        for site in model.all_calls():
            if not site.hazardous:
                continue
            fn = site.function
            event = _recorded_event(model, site)
            if event is not None:
                key = _event_key(model, event, fn)
                if key is not None:
                    reach = HIGH if site.in_graph_region else (fn.confidence or HIGH)
                    if key not in keys or reach.rank > keys[key].rank:
                        keys[key] = reach
        return keys

    @staticmethod
    def _bound_to(model: ModuleModel, site: CallSite) -> set[str]:
        """Keys of the names/attributes an `Event(...)` call is stored in (directly or as an
        element of a list/dict/comprehension)."""
        fn = site.function
        keys: set[str] = set()
        for assign in fn.assignments:
            if assign.value is None:
                continue
            holds = assign.value is site.node or any(
                n is site.node for n in _descendants(assign.value)
            )
            if not holds:
                continue
            for target in assign.targets:
                key = _event_key(model, target, fn)
                if key is not None:
                    keys.add(key)
        for other in fn.calls:  # `self.events.append(Event(...))`
            if other.method not in ("append", "insert", "extend") or other.receiver is None:
                continue
            if any(
                n is site.node
                for arg in other.node.args
                for n in (arg.value, *_descendants(arg.value))
            ):
                key = _event_key(model, other.receiver, fn)
                if key is not None:
                    keys.add(key)
        return keys


def _recorded_event(model: ModuleModel, site: CallSite) -> cst.BaseExpression | None:
    """The event a call records: `ev.record()` / `ev.record(stream)`, `s.record_event(ev)`."""
    event: cst.BaseExpression | None = None
    if site.method == "record" and site.receiver is not None and len(site.node.args) <= 1:
        event = site.receiver
    elif site.method == "record_event" and site.node.args:
        event = site.node.args[0].value
    return event if event is not None and is_event(model, event, site.function) else None


def _descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = list(child_nodes(node))
    while stack:
        current = stack.pop()
        if isinstance(current, cst.FunctionDef | cst.Lambda):
            continue
        yield current
        stack.extend(child_nodes(current))
