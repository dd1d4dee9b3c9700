"""OFL101 wait-on-uncaptured-event: a wait inside capture on an event recorded elsewhere."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.capture_tags import guarded_by_capture_bookkeeping, guarded_by_validity_flag
from offlint.analysis.closures import recorded_in_enclosing_call
from offlint.analysis.events import (
    handed_in_by_caller,
    handing_calls,
    is_external_event,
    recorded_into_local,
    returned_after_recording,
)
from offlint.analysis.facts import (
    is_event,
    local_name,
    recorded_earlier_in_call,
    recorded_locally_before,
    storage_of,
)
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import CallSite
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.diagnostics import Confidence


class WaitOnUncapturedEvent(Rule):
    code = "OFL101"
    explains_reachability = True
    tokens = (".wait(", "wait_event(")

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        for site in model.all_calls():
            if not site.hazardous:
                continue
            if site.method == "wait" and site.receiver is not None and len(site.node.args) <= 1:
                event = site.receiver
            elif site.method == "wait_event" and site.node.args:
                event = site.node.args[0].value
            else:
                continue
            if not is_event(model, event, site.function) or not _may_be_uncaptured(model, site, event):
                continue
            if not handed_in_by_caller(event, site.function):
                yield Finding(site.node, {"event": code_of(event, model)})
                continue
            # an event handed in (`def _wait(ev): ev.wait()`): the wait is as each caller makes
            # it, under the caller's guards, with the caller's event; unsure where no caller is seen
            verdicts = [
                (in_lambda or caller.hazardous) and _may_be_uncaptured(model, caller, arg)
                for caller, arg, in_lambda in handing_calls(model, event, site.function)
            ]
            if not verdicts:
                yield Finding(site.node, {"event": code_of(event, model)}, confidence=Confidence.LOW)
            elif any(verdicts):
                yield Finding(site.node, {"event": code_of(event, model)})


def _may_be_uncaptured(model: ModuleModel, site: CallSite, event: cst.BaseExpression) -> bool:
    """A wait at `site` on `event` may wait on a record made outside the current capture: no
    guard, capture tag, externality or same-call record says otherwise."""
    if guarded_by_capture_bookkeeping(model, site):
        return False  # capture bookkeeping, not the capture test itself (that sets the context)
    if guarded_by_validity_flag(model, site, event):
        return False  # `if self._fork_unjoined:` set only where the event is recorded
    if is_external_event(model, event, site.function):
        return False  # `Event(external=True)`: the wait is a graph node on the live event
    name = local_name(event)
    if name is not None and storage_of(event) is None and recorded_locally_before(site, name):
        return False  # recorded earlier in the same call, hence in the same capture
    if recorded_earlier_in_call(site, event):
        return False  # `self.done.record()` earlier in this call, on every path to the wait
    if returned_after_recording(model, site, event):
        return False  # `_, ready = _start_shared(...)`, which records the event it returns
    if name is not None and storage_of(event) is None and recorded_in_enclosing_call(model, site, name):
        return False  # a closure's event, recorded within the same call of the enclosing function
    return not recorded_into_local(model, event, site.function)  # `sent.append(main.record_event())`
