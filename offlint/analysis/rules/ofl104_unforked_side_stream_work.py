"""OFL104 unforked-side-stream-work: work under `with torch.cuda.stream(s)` with no fork of `s`."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.model import ModuleModel
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.streams import (
    StreamRole,
    fork_key,
    forked_before,
    held_only_when_forked,
    stream_key,
    stream_role,
)
from offlint.analysis.torch_api import STREAM_CONTEXTS, STREAM_SWITCHES


class UnforkedSideStreamWork(Rule):
    code = "OFL104"
    explains_reachability = True
    tokens = ("stream(",)

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        for fn in model.functions:
            for scope in fn.stream_withs:
                # the `torch.cuda.stream(s)` call: in the `with` itself, or bound to the context
                # variable it enters (`ctx = torch.cuda.stream(s)` ... `with ctx:`)
                opener = next(
                    (s for s in fn.calls if s.node is scope.call and s.callee in STREAM_CONTEXTS | STREAM_SWITCHES),
                    None,
                )
                if scope.call is None:  # `with self.stream:`: the stream object is the context
                    if not (fn.reachable and not fn.eager_break and scope.context.may_capture):
                        continue
                elif opener is None or not opener.hazardous or not scope.context.may_capture:
                    continue
                inline = opener is not None and (
                    not isinstance(scope.node, cst.With) or any(item.item is scope.call for item in scope.node.items)
                )
                if stream_role(model, scope.stream, fn) not in (
                    StreamRole.SIDE,
                    StreamRole.DEFAULT,
                ):
                    continue
                inside = [s for s in fn.calls if any(sc is scope for sc in s.stream_scopes)]
                if not inside:
                    continue  # no work under it
                key = stream_key(model, scope.stream, fn)
                if key is None or forked_before(model, fn, key, opener.order if opener is not None and inline else scope.order):
                    continue
                if any(fork_key(model, s) == key for s in inside):
                    continue  # `with stream(s): s.wait_event(ev); ...`: forked before its work
                if held_only_when_forked(model, scope.stream, fn):
                    continue  # a fork handle: set only right after its fork, earlier in the forward
                # `ctx = torch.cuda.stream(s)` ... `with ctx:`: the work is under the `with`
                where: cst.CSTNode = (
                    opener.node
                    if opener is not None and (inline or not isinstance(scope.node, cst.With))
                    else scope.node.items[0].item  # type: ignore[union-attr]
                )
                yield Finding(where, {"stream": code_of(scope.stream, model)})
