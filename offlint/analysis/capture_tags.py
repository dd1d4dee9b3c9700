"""Capture bookkeeping an author keeps by hand: tests of flags and attributes that say where an
event was recorded or whether a capture is under way (`self._made_in_capture`, `capture_id`),
as opposed to the capture test itself (`is_current_stream_capturing()`, which sets contexts)."""

from __future__ import annotations

import libcst as cst

from offlint.analysis.effects import effects_of
from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import ModuleModel, attribute_stores
from offlint.analysis.program import CallSite, ClassInfo, FunctionInfo
from offlint.analysis.syntax import falsy_literal, operands, unsubscripted, walk
from offlint.analysis.torch_api import CAPTURE_TESTS


def mentions_capture_tag(expr: cst.BaseExpression) -> bool:
    """A test that looks at capture bookkeeping (`self._captured_in`, `capture_id == ...`,
    `self._ready_before_capture`): the author tracks where the event was recorded."""
    for node in walk(expr):
        name = dotted_name(node) if isinstance(node, cst.Name | cst.Attribute) else None
        if name is not None and "captur" in name.lower():
            return True
    return False


def guarded_by_capture_tag(site: CallSite) -> bool:
    return any(mentions_capture_tag(test) for test, _ in site.guards)


def mentions_capture_bookkeeping(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> bool:
    """A test that reads *persistent* capture bookkeeping - a `self.`/module attribute whose name
    mentions capture (`self._made_in_capture`, `self._capture_id`) - as opposed to a test of the
    current capture state (`is_current_stream_capturing()`, a local `capturing` flag)."""
    for node in walk(expr):
        if isinstance(node, cst.Call) and model.qualname(node.func) in CAPTURE_TESTS:
            continue
        if not isinstance(node, cst.Attribute):
            continue
        q = model.qualname(node)
        if q is not None and q.startswith("torch."):
            continue
        if "captur" in node.attr.value.lower():
            return True
    return False


def capture_bookkeeping_tests(model: ModuleModel, fn: FunctionInfo) -> list[cst.BaseExpression]:
    """Tests (`if`/`while`/ternary/`assert`) in a function that read persistent capture
    bookkeeping (see `mentions_capture_bookkeeping`)."""
    tests: list[cst.BaseExpression] = []
    for node in walk(fn.node.body):
        test: cst.BaseExpression | None = None
        if isinstance(node, cst.If | cst.While | cst.IfExp | cst.Assert):
            test = node.test
        if test is not None and mentions_capture_bookkeeping(model, test, fn):
            tests.append(test)
    return tests


# ---------------------------------------------------------------- OFL102-OFL107 helpers
# Streams: which stream an expression names (its *key*, for "the same stream" questions) and its
# *role* (the current/compute stream, the legacy default stream, or a side stream); forks (the
# side stream is made to wait on the current one) and joins (the current stream waits on the
# side stream's work), within one call and through the same-module functions it calls.


def mentions_capture_tag_strict(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> bool:
    """Capture bookkeeping in a test (`self._captured_in == capture_id`, `tag_captured`), not a
    test of the current capture state: `is_current_stream_capturing()` and flags assigned from it
    do not count (they decide the context instead)."""
    if mentions_capture_bookkeeping(model, expr, fn):
        return True
    nodes = list(walk(expr))  # read twice: names of attributes, then every name
    attr_names = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
    # `is_graph_capturing()` imported from elsewhere: a test of the capture state, not a tag
    predicates = {id(n.func) for n in nodes if isinstance(n, cst.Call) and model.is_capture_test(n, fn)}
    for node in nodes:
        if id(node) in attr_names or id(node) in predicates:
            continue  # `.is_current_stream_capturing`, `self.x_captured`: attributes judged above
        if isinstance(node, cst.Name) and "captur" in node.value.lower():
            if model.is_capture_test(node, fn):
                continue
            q = model.qualname(node)
            if q is not None and q.startswith("torch."):
                continue
            if fn.tests_capture and _is_predicate_call_name(model, node):
                continue
            return True
    return False


def _is_predicate_call_name(model: ModuleModel, node: cst.Name) -> bool:
    target = model.module_functions.get(node.value)
    return target is not None and target.is_capture_predicate


def guarded_by_capture_bookkeeping(model: ModuleModel, site: CallSite) -> bool:
    """A guard around the call consults capture bookkeeping (see `mentions_capture_tag_strict`)."""
    return any(mentions_capture_tag_strict(model, test, site.function) for test, _ in site.guards)


def guarded_by_validity_flag(model: ModuleModel, site: CallSite, event: cst.BaseExpression) -> bool:
    """`if self._fork_unjoined: wait(self._store_done)` where the class sets that flag true only in
    the methods that record `self._store_done` (and clears it elsewhere), or a payload the recorder
    leaves and the waiter empties (`self.kw_ready.wait(); kw, self.kw = self.kw, None`): the author
    tracks by hand that the event was recorded where the wait will run, as a capture tag does."""
    event_attr = self_attribute(unsubscripted(event))  # `self.ev`, or an element `self.evs[k]`
    cls = site.function.cls
    if event_attr is None or cls is None:
        return False
    recorders = model.remembered(("methods recording self attributes", id(cls)), lambda: _recorders(model, cls))
    return _vouched_by(site, cls, recorders.get(event_attr, set()), event_attr)


def fork_handed_over(model: ModuleModel, site: CallSite, stream_attr: str) -> bool:
    """`cur.wait_stream(self.side)` in a method that empties a payload (`self._state = None`) or
    tests a flag that only the methods forking `self.side` set (`self._state = out, n` after
    `self.side.wait_stream(cur)`): the join takes over what a fork of the same pipeline left, as
    a start/consume pair does (a prefetch for the next layer of the same forward)."""
    cls = site.function.cls
    if cls is None:
        return False
    forkers = model.remembered(("methods forking self attributes", id(cls)), lambda: _forkers(model, cls))
    return _vouched_by(site, cls, forkers.get(stream_attr, set()), stream_attr)


def _vouched_by(site: CallSite, cls: ClassInfo, producers: set[int], own_attr: str) -> bool:
    """A flag the site's guards test, or a payload its function empties after it, that only the
    `producers` set truthy."""
    if not producers:
        return False
    flags = [flag for test, taken in site.guards if taken for flag in _tested_flags(test)]
    # a hand-off: `kw, self.kw = self.kw, None` after the wait takes what the recorder left
    flags += _taken_after(site)
    for flag in flags:
        if flag == own_attr:
            continue  # `if self.ev is not None:` says nothing of where it was recorded
        truthy = [fn for fn, value in attribute_stores(cls, flag) if value is not None and not falsy_literal(value)]
        if truthy and all(id(fn) in producers for fn in truthy):
            return True
    return False


def _forkers(model: ModuleModel, cls: ClassInfo) -> dict[str, set[int]]:
    """For each attribute of the class, the methods (by id) that fork the stream it holds:
    `self.side.wait_stream(...)`, also through a local alias (`s = self.side; s.wait_stream(cur)`).
    Indexed once per class."""
    found: dict[str, set[int]] = {}
    for fn in cls.methods.values():
        aliases = {
            t.value: attr
            for a in fn.assignments
            if a.value is not None and (attr := self_attribute(a.value)) is not None
            for t in a.targets
            if isinstance(t, cst.Name)
        }
        for effect in effects_of(model, fn):
            if effect.method != "wait_stream":
                continue
            attr = self_attribute(effect.receiver)
            if attr is None and isinstance(effect.receiver, cst.Name):
                attr = aliases.get(effect.receiver.value)
            if attr is not None:
                found.setdefault(attr, set()).add(id(fn))
    return found


def _taken_after(site: CallSite) -> list[str]:
    """Attributes the waiting function empties after the wait (`self.kw = None`, `kw, self.kw =
    self.kw, None`): a payload handed over by whoever recorded the event."""
    taken: list[str] = []
    for assign in site.function.assignments:
        if assign.order <= site.order or assign.value is None:
            continue
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
        for target in assign.targets:
            if isinstance(target, cst.Tuple) and isinstance(assign.value, cst.Tuple):
                if len(target.elements) == len(assign.value.elements):
                    pairs += [(t.value, v.value) for t, v in zip(target.elements, assign.value.elements, strict=True)]
            else:
                pairs.append((target, assign.value))
        taken += [attr for t, v in pairs if (attr := self_attribute(t)) is not None and falsy_literal(v)]
    return taken


def _recorders(model: ModuleModel, cls: ClassInfo) -> dict[str, set[int]]:
    """For each attribute of the class, the methods (by id) that record an event into it:
    `self.x.record(...)`, `self.x = stream.record_event()`. Indexed once per class."""
    found: dict[str, set[int]] = {}
    for fn in cls.methods.values():
        for effect in effects_of(model, fn):
            if effect.method == "record":
                attr = self_attribute(unsubscripted(effect.receiver))
                if attr is not None:
                    found.setdefault(attr, set()).add(id(fn))
        for a in fn.assignments:
            if (
                isinstance(a.value, cst.Call)
                and isinstance(a.value.func, cst.Attribute)
                and a.value.func.attr.value == "record_event"
            ):
                for t in a.targets:
                    attr = self_attribute(t)
                    if attr is not None:
                        found.setdefault(attr, set()).add(id(fn))
    return found


def _tested_flags(test: cst.BaseExpression) -> list[str]:
    """`self.f` tested for truth as a conjunct: `self.f`, `self.f and x`, `x and self.f`."""
    return [attr for operand in operands(test, cst.And) if (attr := self_attribute(operand)) is not None]
