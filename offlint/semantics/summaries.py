"""Layer 4: what each function does to the objects that matter, composed over the call graph.

A unit's own effects are read from its calls' callee objects: a method of a stream, event or
stream context that orders work or syncs (`stream`), a stream or event made or entered, a copy to
the device from a host tensor kept between calls (`host-copy`: one that a field, a global or a
container holds). Its summary adds its callees' summaries, to a fixpoint over the call graph's
cycles, with no depth limit.
"""

from __future__ import annotations

from collections.abc import Iterable

from offlint.semantics.heap import Heap, Obj
from offlint.semantics.lowered import Site, Unit
from offlint.semantics.protocols import torch as api

STREAM = "stream"
HOST_COPY = "host-copy"
_STREAM_OBJECTS = frozenset({"stream", "event", "current-stream", "default-stream", "stream-context"})
_MAKES_STREAMS = frozenset({"stream", "event", "stream-context", "set-stream"})


class Summaries:
    def __init__(self, heap: Heap) -> None:
        self.heap = heap
        self.kept_host = _kept_host_objects(heap)
        self.own: dict[str, set[str]] = {uid: self._own(unit) for uid, unit in heap.units.items()}
        self.callees: dict[str, set[str]] = {
            uid: {target for site in unit.sites for target, _ in heap.call_targets.get(site.id, ())}
            | {target for target, _ in heap.unit_edges.get(uid, ())}
            for uid, unit in heap.units.items()
        }
        self.total = self._close()

    def site_effects(self, site: Site) -> set[str]:
        found: set[str] = set()
        heap = self.heap
        callee = heap.objects(site.callee) if site.callee is not None else set()
        for obj in callee:
            kind = obj[0]
            if kind == "meth":
                receiver, name = obj[1], obj[2]
                if receiver[0] in _STREAM_OBJECTS and name in api.STREAM_METHODS:
                    found.add(STREAM)
                elif name in api.TO_DEVICE_METHODS and self._host_side(receiver, site):
                    found.add(HOST_COPY)
            elif (kind == "api" and api.MAKES.get(api.canonical(obj[1])) in _MAKES_STREAMS) or kind in ("stream-context", "stream"):
                found.add(STREAM)
        if site.method in api.STREAM_PROTOCOL_METHODS:
            found.add(STREAM)
        return found

    def _host_side(self, receiver: Obj, site: Site) -> bool:
        if receiver[0] == "host" and receiver in self.kept_host:
            return True
        if site.method == "copy_" and site.args and site.args[0] is not None:
            return any(o in self.kept_host for o in self.heap.objects(site.args[0]))
        return False

    def _own(self, unit: Unit) -> set[str]:
        found: set[str] = set()
        for site in unit.sites:
            found |= self.site_effects(site)
        return found

    def _close(self) -> dict[str, frozenset[str]]:
        total = {uid: set(effects) for uid, effects in self.own.items()}
        callers: dict[str, set[str]] = {}
        for uid, targets in self.callees.items():
            for target in targets:
                callers.setdefault(target, set()).add(uid)
        work = [uid for uid, effects in total.items() if effects]
        while work:
            uid = work.pop()
            for caller in callers.get(uid, ()):
                before = len(total[caller])
                total[caller] |= total[uid]
                if len(total[caller]) != before:
                    work.append(caller)
        return {uid: frozenset(effects) for uid, effects in total.items()}

    def of(self, uids: Iterable[str]) -> frozenset[str]:
        found: set[str] = set()
        for uid in uids:
            found |= self.total.get(uid, frozenset())
        return frozenset(found)


def _kept_host_objects(heap: Heap) -> set[Obj]:
    """Host tensors that outlive a call: held by an attribute, a global, a class or a container."""
    kept: set[Obj] = set()
    for node, objs in heap.pts.items():
        if (isinstance(node, tuple) and node and node[0] in ("f", "e")) or (isinstance(node, str) and node[:2] in ("g:", "c:")):
            kept.update(o for o in objs if o[0] == "host")
    return kept
