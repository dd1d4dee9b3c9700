"""What other modules need to know of this one (`callgraph.py` joins it across the tree): its
functions that capture reaches, and the imported functions they call where capture is possible."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import libcst as cst

from offlint.analysis.callgraph import (
    DEFERRED_EVENT_FORK,
    SEGMENTED_CAPTURE,
    Handed,
    IndexEntry,
    ModuleIndex,
)
from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import Kind
from offlint.analysis.reachability import HOOK_REASON, reach_root
from offlint.analysis.streams import capture_aware_joins
from offlint.diagnostics import Confidence

if TYPE_CHECKING:
    from offlint.analysis.model import ModuleModel
    from offlint.analysis.program import CallSite, FunctionInfo

# what a call's arguments tell a callee in another module: streams, events, and where host
# tensors live (pinned or pageable)
CROSS_MODULE_KINDS = frozenset({Kind.STREAM, Kind.EVENT, Kind.PINNED_HOST, Kind.PAGEABLE_HOST})


def module_index(model: ModuleModel) -> ModuleIndex:
    """What other modules need to know of this one: its reachable functions and its functions'
    calls to imported names, made where capture is possible."""
    resolver = model.resolver
    bindings = {name: target for name, target in resolver.bindings.items() if not target.startswith("torch")}
    bindings.update(resolver.relative)
    entries: list[IndexEntry] = []
    for fn in model.functions:
        edges: list[tuple[str, bool, Handed]] = []
        for call in fn.calls:
            if not (call.in_graph_region or call.context.may_capture):
                continue
            if fn.eager_break and not call.in_graph_region:
                continue  # an eager break's helpers run between the captured segments
            target = _imported(call.node.func, bindings)
            if target is not None:
                edges.append((target, call.in_graph_region, _handed(model, call)))
        confidence = fn.confidence.value if fn.confidence is not None else ""
        if edges and (
            confidence == Confidence.HIGH.value or any(inside for _, inside, _ in edges) or _on_a_hook_path(fn)
        ):
            entries.append((fn.qualname, confidence, _root_reason(fn), tuple(dict.fromkeys(edges))))
    if model.segmented_capture:
        entries.append(SEGMENTED_CAPTURE)
    if _defers_an_event_fork(model):
        entries.append(DEFERRED_EVENT_FORK)
    return tuple(entries)


def _defers_an_event_fork(model: ModuleModel) -> bool:
    """A side stream waits on an event in capture-reachable code and the module joins through a
    capture-aware join elsewhere (the shape OFL103 lets pass unless the tree captures in segments;
    the rule decides on the re-analysis)."""
    forks = any(site.method == "wait_event" and site.hazardous for site in model.all_calls())
    return forks and bool(capture_aware_joins(model))


def _handed(model: ModuleModel, call: CallSite) -> Handed:
    """The known kinds of what `call` passes (`value=value` with `value` a pageable host tensor):
    the callee, in another module, learns them with its reach."""
    passed: list[tuple[str, str]] = []
    for index, arg in enumerate(call.node.args):
        if arg.star:
            break
        typed = model.kind_of(arg.value, call.function)
        if typed.kind in CROSS_MODULE_KINDS and not typed.guessed:
            passed.append((arg.keyword.value if arg.keyword is not None else f"#{index}", typed.kind.value))
    return tuple(passed)


def _root_reason(fn: FunctionInfo) -> str:
    """Why reachability starts where `fn`'s chain of callers starts."""
    root = reach_root(fn)
    if root is fn:
        return fn.reachable_reason
    return f"called from {root.qualname} ({root.reachable_reason})"


def _on_a_hook_path(fn: FunctionInfo) -> bool:
    """Medium reach crosses modules only from offloading hooks (installed hooks and forwards,
    hook protocols): their helpers elsewhere are the offloading machinery the hook runs in every
    forward, where a model's forward calls helpers shared with paths no graph runner captures."""
    if fn.confidence is not Confidence.MEDIUM:
        return False
    reason = _root_reason(fn)
    return HOOK_REASON in reason or "installed as a" in reason


def _imported(func: cst.BaseExpression, bindings: Mapping[str, str]) -> str | None:
    dotted = dotted_name(func)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    target = bindings.get(head)
    if target is None:
        return None
    return f"{target}.{rest}" if rest else target


