"""OFL204 record-stream-on-allocating-stream: `t.record_stream(torch.cuda.current_stream())`
evaluated inside `with torch.cuda.stream(side)` records `side` itself - a no-op."""

from __future__ import annotations

from collections.abc import Iterator

from offlint.analysis.facts import current_stream_scope
from offlint.analysis.model import ModuleModel
from offlint.analysis.rule import Finding, Rule, code_of


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
            yield Finding(
                site.node,
                {
                    "tensor": code_of(site.receiver, model),
                    "stream": code_of(scope.stream, model),
                },
            )
