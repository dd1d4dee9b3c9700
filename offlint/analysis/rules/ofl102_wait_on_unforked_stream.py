"""OFL102 wait-on-unforked-stream: the current stream joins a side stream never forked in this call."""

from __future__ import annotations

from collections.abc import Iterator

from offlint.analysis.capture_tags import fork_handed_over, guarded_by_capture_bookkeeping
from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import ModuleModel
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.streams import (
    StreamRole,
    forked_before,
    forked_by_sibling,
    held_only_when_forked,
    stream_key,
    stream_role,
)


class WaitOnUnforkedStream(Rule):
    code = "OFL102"
    explains_reachability = True
    tokens = ("wait_stream(",)

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        for site in model.all_calls():
            if site.method != "wait_stream" or not site.hazardous or site.receiver is None:
                continue
            if len(site.node.args) != 1:
                continue
            fn = site.function
            # the receiver must be the current (compute) stream: `side.wait_stream(cur)` is a fork
            if stream_role(model, site.receiver, fn) not in (
                StreamRole.CURRENT,
                StreamRole.DEFAULT,
            ):
                continue
            side = site.node.args[0].value
            if stream_role(model, side, fn) is not StreamRole.SIDE:
                continue
            key = stream_key(model, side, fn)
            if key is None or forked_before(model, fn, key, site.order):
                continue
            if forked_by_sibling(model, fn, key):
                continue  # a sibling hook of the same enclosing call forked it
            if held_only_when_forked(model, side, fn):
                continue  # a fork handle: set only right after its fork, earlier in the forward
            if guarded_by_capture_bookkeeping(model, site):
                continue
            attr = self_attribute(side)
            if attr is not None and fork_handed_over(model, site, attr):
                continue  # a start/consume pair: the consumer takes what the fork left
            yield Finding(
                site.node,
                {
                    "stream": code_of(side, model),
                    "current": code_of(site.receiver, model),
                },
            )
