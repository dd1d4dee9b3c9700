"""OFL202 stale-captured-event: an eager wait on an event whose last record may have happened
during a (now ended) capture."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from offlint.analysis.capture_tags import capture_bookkeeping_tests
from offlint.analysis.events import is_external_event
from offlint.analysis.facts import is_event, is_parameter, storage_of
from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import Context, ModuleModel
from offlint.analysis.program import CallSite, FunctionInfo
from offlint.analysis.reachability import run_after_capture_by_driver
from offlint.analysis.rule import Finding, Rule, code_of


@dataclass(frozen=True)
class _Record:
    key: str
    function: FunctionInfo
    order: int


class StaleCapturedEvent(Rule):
    code = "OFL202"
    tokens = ("record(", "record_event(")

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        records = self._records_that_may_capture(model)
        if not records:
            return
        for site in model.all_calls():
            if site.hazardous and not run_after_capture_by_driver(model, site.function):
                continue  # a wait that may itself be captured is OFL101's
            event = _waited_event(site)
            if event is None or not is_event(model, event, site.function):
                continue
            key = _storage_key(event, site.function, model)
            if key is None or key not in records:
                continue
            if capture_bookkeeping_tests(model, site.function):
                continue  # the wait checks where the event was recorded
            if is_external_event(model, event, site.function):
                continue  # `Event(external=True)`: waiting on it after a captured record is legal
            recorder = records[key]
            # as sure as a capture reaches the record (a method of the class only: low)
            yield Finding(
                site.node,
                {"event": code_of(event, model), "recorder": recorder.function.name},
                confidence=recorder.function.confidence,
            )

    def _records_that_may_capture(self, model: ModuleModel) -> dict[str, _Record]:
        found: dict[str, _Record] = {}
        for fn in model.functions:
            if not fn.reachable:
                continue
            for site in fn.calls:
                if site.method == "record" and site.receiver is not None and site.hazardous:
                    key = _storage_key(site.receiver, fn, model)
                    if (
                        key is not None
                        and is_event(model, site.receiver, fn)
                        and not _tracked(model, fn, key, site)
                    ):
                        found.setdefault(key, _Record(key, fn, site.order))
            for assign in fn.assignments:
                value = assign.value
                if (
                    isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value == "record_event"
                    and assign.context.may_capture
                ):
                    for target in assign.targets:
                        key = _storage_key(target, fn, model)
                        if key is not None and not _tracked(model, fn, key, None):
                            found.setdefault(key, _Record(key, fn, assign.order))
        return found


def _waited_event(site: CallSite) -> cst.BaseExpression | None:
    if site.method == "wait" and site.receiver is not None and len(site.node.args) <= 1:
        return site.receiver
    if site.method == "wait_event" and site.node.args:
        return site.node.args[0].value
    return None


def _storage_key(expr: cst.BaseExpression, fn: FunctionInfo, model: ModuleModel) -> str | None:
    """`self.X` (also for `self.X[i]`) or a module global; None for locals and arguments."""
    stored = storage_of(expr)
    if stored is not None:
        if stored.startswith("self.") and fn.cls is not None:
            return f"{fn.cls.name}.{stored}"
        return stored
    node = expr
    while isinstance(node, cst.Subscript):
        node = node.value
    if (
        isinstance(node, cst.Name)
        and node.value in model.oracle.globals
        and node.value not in fn.locals
        and not is_parameter(fn, node.value)
    ):
        return node.value
    return None


def _tracked(model: ModuleModel, fn: FunctionInfo, key: str, record: CallSite | None) -> bool:
    """The recording function keeps track of captures: it re-binds the event in a capturing
    branch (`self.ev = None` when capturing), or stores capture bookkeeping next to it
    (`self._ev_captured = torch.cuda.is_current_stream_capturing()`)."""
    for assign in fn.assignments:
        for target in assign.targets:
            if (
                assign.context is Context.CAPTURING
                and _storage_key(target, fn, model) == key
                and (
                    record is None
                    or assign.order > record.order
                    or record.context is not Context.CAPTURING
                )
            ):
                return True
            attr = self_attribute(target)
            if attr is not None and "captur" in attr.lower():
                return True
    return bool(capture_bookkeeping_tests(model, fn))
