"""Effect summaries: what a call does to the streams and events it is handed.

A helper that acts on its parameters (`def _wait(ev): ev.wait()`, `def _fork(s, cur):
s.wait_stream(cur)`) acts, at each same-module call, on the arguments that call hands it
(`self._wait(self.load_event)` waits on `self.load_event`). `effects_of(fn)` lists the stream and
event operations a function performs in its own body and, composed at its calls of such helpers
(two levels deep), with the helper's parameters read as the caller's arguments. Facts that ask
"which methods record / fork `self.X`" read these instead of the raw call sites, so extracting a
statement into a helper keeps them."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from offlint.analysis.model import ModuleModel
from offlint.analysis.program import CallSite, FunctionInfo
from offlint.analysis.syntax import call_argument, with_value

# stream and event operations whose receiver is the object acted on
OPERATIONS = frozenset(
    {"record", "wait", "wait_event", "wait_stream", "record_event", "record_stream", "synchronize", "query"}
)


@dataclass(frozen=True)
class Effect:
    method: str
    receiver: cst.BaseExpression  # as the function performing the call names it
    arguments: tuple[cst.BaseExpression, ...]  # likewise
    site: CallSite  # the call in the function itself (the operation, or the helper call)


def effects_of(model: ModuleModel, fn: FunctionInfo, _depth: int = 0) -> list[Effect]:
    """The stream/event operations `fn` performs, its helpers' on what it hands them included."""
    return model.remembered(("effects", id(fn), _depth), lambda: _effects(model, fn, _depth))


def _effects(model: ModuleModel, fn: FunctionInfo, depth: int) -> list[Effect]:
    found: list[Effect] = []
    for site in fn.calls:
        if site.method in OPERATIONS and site.receiver is not None:
            found.append(Effect(site.method, site.receiver, tuple(a.value for a in site.node.args), site))
            continue
        helper = model._called_function(site.node, fn) if depth < 2 else None
        if helper is None or helper is fn:
            continue
        bound = helper.is_method and isinstance(site.node.func, cst.Attribute)
        for inner in effects_of(model, helper, depth + 1):
            receiver = _as_caller(inner.receiver, helper, site, bound)
            mapped = [_as_caller(a, helper, site, bound) for a in inner.arguments]
            if receiver is None and not (isinstance(inner.receiver, cst.Call) and any(m is not None for m in mapped)):
                continue  # acts on the helper's own objects, not on what the caller hands it
            # `torch.cuda.current_stream().wait_event(ev)`: a receiver made by a call is made again
            # at the caller (the current stream is the caller's too)
            arguments = tuple(m if m is not None else a for m, a in zip(mapped, inner.arguments, strict=True))
            found.append(Effect(inner.method, receiver if receiver is not None else inner.receiver, arguments, site))
    return found


def _as_caller(
    expr: cst.BaseExpression, helper: FunctionInfo, site: CallSite, bound: bool
) -> cst.BaseExpression | None:
    """`expr` of the helper as the caller names it: a parameter is the argument passed for it;
    `self.x` stays `self.x` for a method the caller calls on `self`; anything else is the helper's
    own (None: no effect on what the caller holds)."""
    if isinstance(expr, cst.Name):
        if expr.value == "self" or not any(p.name.value == expr.value for p in _params(helper)):
            return None
        return call_argument(site.node, helper.node.params, expr.value, bound)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        func = site.node.func
        on_self = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
        return expr if on_self else None
    if isinstance(expr, cst.Subscript | cst.Attribute):
        inner = _as_caller(expr.value, helper, site, bound)
        return with_value(expr, inner) if inner is not None else None
    return None


def _params(fn: FunctionInfo) -> list[cst.Param]:
    params = fn.node.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]
