"""OFL101 wait-on-uncaptured-event: a wait inside capture on an event recorded elsewhere."""

from __future__ import annotations

from collections.abc import Iterator

from offlint.analysis.capture_tags import guarded_by_capture_bookkeeping, guarded_by_validity_flag
from offlint.analysis.closures import recorded_in_enclosing_call
from offlint.analysis.events import (
    handed_in_by_caller,
    is_external_event,
    recorded_into_local,
    stored_by_a_caller,
)
from offlint.analysis.facts import (
    is_event,
    local_name,
    recorded_earlier_in_call,
    recorded_locally_before,
    storage_of,
)
from offlint.analysis.model import ModuleModel
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
            if not is_event(model, event, site.function):
                continue
            if guarded_by_capture_bookkeeping(model, site):
                continue  # capture bookkeeping, not the capture test itself (that sets the context)
            if guarded_by_validity_flag(model, site, event):
                continue  # `if self._fork_unjoined:` set only where the event is recorded
            if is_external_event(model, event, site.function):
                continue  # `Event(external=True)`: the wait is a graph node on the live event
            name = local_name(event)
            if name is not None and storage_of(event) is None and recorded_locally_before(site, name):
                continue  # recorded earlier in the same call, hence in the same capture
            if recorded_earlier_in_call(site, event):
                continue  # `self.done.record()` earlier in this call, on every path to the wait
            if name is not None and storage_of(event) is None and recorded_in_enclosing_call(model, site, name):
                continue  # a closure's event, recorded within the same call of the enclosing function
            if recorded_into_local(model, event, site.function):
                continue  # `sent.append(main.record_event())` ... `wait_event(sent[i])`: this call's
            # an event handed in by the caller (`ready`, `layer.done_event`): whether it was
            # recorded before this capture is the caller's to say, so the finding is unsure
            handed_in = handed_in_by_caller(event, site.function) and not stored_by_a_caller(
                model, event, site.function
            )
            yield Finding(site.node, {"event": code_of(event, model)}, confidence=Confidence.LOW if handed_in else None)
