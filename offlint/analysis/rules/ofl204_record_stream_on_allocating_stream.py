"""OFL204 record-stream-on-allocating-stream: `t.record_stream(torch.cuda.current_stream())`
evaluated inside `with torch.cuda.stream(side)` records `side` itself - a no-op."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.facts import innermost_side_scope
from offlint.analysis.model import Assignment, CallSite, FunctionInfo, ModuleModel, StreamScope
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.torch_api import CURRENT_STREAM


class RecordStreamOnAllocatingStream(Rule):
    code = "OFL204"
    tokens = ("record_stream(",)

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        for site in model.all_calls():
            if site.method != "record_stream" or site.receiver is None or len(site.node.args) != 1:
                continue
            arg = site.node.args[0].value
            scope = self._current_stream_taken_inside(model, site, arg)
            if scope is None:
                continue
            yield Finding(
                site.node,
                {
                    "tensor": code_of(site.receiver, model),
                    "stream": code_of(scope.stream, model),
                },
            )

    def _current_stream_taken_inside(
        self, model: ModuleModel, site: CallSite, arg: cst.BaseExpression
    ) -> StreamScope | None:
        """The side-stream scope in which `arg` - the current stream - was evaluated."""
        if isinstance(arg, cst.Call) and model.qualname(arg.func) in CURRENT_STREAM:
            return innermost_side_scope(model, site.stream_scopes)
        if isinstance(arg, cst.Name):
            binding = _last_binding(site.function, arg.value, site.order)
            if (
                binding is not None
                and isinstance(binding.value, cst.Call)
                and model.qualname(binding.value.func) in CURRENT_STREAM
            ):
                return innermost_side_scope(model, binding.stream_scopes)
        return None


def _last_binding(fn: FunctionInfo, name: str, before: int) -> Assignment | None:
    found: Assignment | None = None
    for assign in fn.assignments:
        if assign.order >= before:
            break
        if any(isinstance(t, cst.Name) and t.value == name for t in assign.targets):
            found = assign
    return found
