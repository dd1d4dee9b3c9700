"""OFL204 record-stream-on-allocating-stream: `t.record_stream(torch.cuda.current_stream())`
evaluated inside `with torch.cuda.stream(side)` records `side` itself - a no-op."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.events import handing_calls
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import CallSite, FunctionInfo, StreamScope
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.streams import current_stream_scope
from offlint.analysis.syntax import same_code
from offlint.diagnostics import Confidence


def _made_in_the_block(model: ModuleModel, site: CallSite, scope: StreamScope) -> bool:
    """The recorded tensor (`t`, `t.data`) is assigned before the record under the side-stream
    block: in this function (lexically, or because the whole function runs in a caller's
    block), or, for a helper handed the tensor (`_record(t, cur)`), where its caller makes it.
    Allocated on the side stream, so its consumer is another stream that the record misses."""
    receiver = site.receiver
    assert receiver is not None
    if _assigned_in_block(site.function, receiver, site.order, site.stream_scopes, scope):
        return True
    # handed in: only where the caller makes it inside the block itself (a caller that merely
    # runs under a caller's block passes tensors made before it, as often as not)
    return any(
        any(s is scope for s in caller.stream_scopes)
        and _assigned_in_block(caller.function, arg, caller.order, caller.stream_scopes, scope)
        for caller, arg, _ in handing_calls(model, receiver, site.function)
    )


def _assigned_in_block(
    fn: FunctionInfo,
    receiver: cst.BaseExpression,
    order: int,
    scopes: tuple[StreamScope, ...],
    scope: StreamScope,
) -> bool:
    lexical = any(s is scope for s in scopes)
    for assign in fn.assignments:
        if assign.order >= order:
            continue
        if isinstance(assign.value, cst.Name | cst.Attribute | cst.Subscript):
            continue  # `t = reduced.data`, `param.grad = None`: an alias (or nothing), no allocation
        if not any(same_code(target, receiver) or same_code(target, _data_base(receiver)) for target in assign.targets):
            continue
        if not lexical or any(s is scope for s in assign.stream_scopes):
            return True
    return False


def _data_base(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`t` for `t.data`."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return expr.value
    return expr


class RecordStreamOnAllocatingStream(Rule):
    code = "OFL204"
    tokens = ("record_stream(",)

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        for site in model.all_calls():
            if site.method != "record_stream" or site.receiver is None or len(site.node.args) != 1:
                continue
            # the recorded stream was taken as the current stream inside a side-stream block
            # (here, or in the caller that handed it down or calls this code in one)
            arg = site.node.args[0].value
            scope = current_stream_scope(model, site.function, arg, site.order, site.stream_scopes)
            if scope is None:
                continue
            if not _made_in_the_block(model, site, scope):
                # a tensor made before the block (a gradient, an argument) and used on the side
                # stream in it: recording the side stream is the right call
                continue
            yield Finding(
                site.node,
                {
                    "tensor": code_of(site.receiver, model),
                    "stream": code_of(scope.stream, model),
                },
                # a no-op record is wrong however the code is reached, captured or not
                confidence=Confidence.HIGH,
            )
