"""OFL103 unjoined-side-stream: a fork whose join happens only in another call."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.closures import joined_within_enclosing_call
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import CallSite, FunctionInfo
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.streams import (
    StreamRole,
    capture_aware_joins,
    fork_handed_to_a_join,
    fork_key,
    handed_to_host_waiter,
    joined_after,
    joined_by_sibling,
    stream_role,
)
from offlint.analysis.syntax import child_nodes, same_code


def _returns_recorded_event(model: ModuleModel, fn: FunctionInfo, order: int) -> bool:
    """The function records a local event after the fork and returns it (alone or inside a
    result object): the join is handed to the caller, who gets the event - unless the result
    object only ever waits for it from the host, which joins no stream."""
    recorded = {
        site.receiver.value
        for site in fn.calls
        if site.order > order and site.method == "record" and isinstance(site.receiver, cst.Name)
    }
    if not recorded:
        return False
    for ret in fn.returns:
        if ret.order > order and ret.node.value is not None:
            names = {n.value for n in _names(ret.node.value)}
            if any(not handed_to_host_waiter(model, ret.node.value, name) for name in names & recorded):
                return True
    return False


def _made_current(fn: FunctionInfo, fork: CallSite) -> bool:
    """The forked stream becomes the current one afterwards (`torch.cuda.set_stream(side)`): the
    work that follows runs on it as the capturing stream, so there is nothing to join."""
    side = fork.receiver
    return side is not None and any(
        site.order > fork.order
        and (site.callee or "").rsplit(".", 1)[-1] == "set_stream"
        and len(site.node.args) == 1
        and same_code(site.node.args[0].value, side)
        for site in fn.calls
    )


def _names(node: cst.CSTNode) -> list[cst.Name]:
    out: list[cst.Name] = []
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            out.append(current)
        stack.extend(child_nodes(current))
    return out


class UnjoinedSideStream(Rule):
    code = "OFL103"
    explains_reachability = True
    tokens = ("wait_stream(", "wait_event(")

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        joins: list[FunctionInfo] | None = None
        for fn in model.functions:
            seen: set[str] = set()
            for site in fn.calls:
                # an eager break of a segmented capture must join what it forks before it returns
                if not (site.hazardous or site.function.eager_break) or site.receiver is None:
                    continue
                key = fork_key(model, site, strict=True)
                if key is None or key in seen:
                    continue
                if stream_role(model, site.receiver, fn) not in (
                    StreamRole.SIDE,
                    StreamRole.DEFAULT,
                ):
                    continue
                seen.add(key)
                if joined_after(model, fn, key, site.order, site):
                    continue
                if _returns_recorded_event(model, fn, site.order):
                    continue  # the caller gets the event to join (publish/consume pairs)
                if _made_current(fn, site):
                    continue  # `side.wait_stream(cur); torch.cuda.set_stream(side)`: a switch, not a fork
                if fork_handed_to_a_join(model, site):
                    continue  # kept on self as a fork handle that a later step of the forward joins
                if joined_within_enclosing_call(model, fn, site.order) or joined_by_sibling(model, fn, key):
                    continue  # a sibling closure of the same enclosing call joins it
                if joins is None:
                    joins = capture_aware_joins(model)
                if any(j is not fn for j in joins) and not (
                    model.options.segmented_capture and site.method == "wait_event"
                ):
                    # the module offers a capture-aware join (documented) - which a segment's end
                    # precedes under segmented capture, where only `wait_stream` forks are joined
                    continue
                yield Finding(
                    site.node,
                    {"stream": code_of(site.receiver, model), "function": fn.qualname},
                )
