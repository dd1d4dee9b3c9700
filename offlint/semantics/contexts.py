"""Layer 5: which functions a CUDA graph capture reaches, at which tier, through which calls.

Entries (shared/CATALOGUE.md):
- `high`: the calls inside a capture region (a `with` on any object that is a graph-capture
  context, however it was made or handed over; `capture_begin()` ... `capture_end()` on a graph
  object), at module level too, and the callables handed to `make_graphed_callables`;
- `medium`: the forward path when the capture lives elsewhere: `forward` of `nn.Module` and
  autograd `Function` subclasses, registered hooks and installed forwards, when their effects
  (`summaries.py`) touch streams, events or kept host tensors; and the methods of classes that
  implement an interface a serving engine calls inside its capture (`protocols/engines.py`).
Reach flows along resolved calls, not through calls that only run when no capture is under
way (a branch on a capture-flag object), and never into a function that drives a capture (it
runs around its region). A call whose receiver holds no object falls back to the tree's methods
of that name, one tier lower (none past four defining classes).
Every reached function keeps the chain that reached it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from offlint.semantics.heap import BUILTIN_METHOD_NAMES, Heap, Obj
from offlint.semantics.lowered import Site, Unit
from offlint.semantics.protocols import engines
from offlint.semantics.protocols import torch as api
from offlint.semantics.summaries import Summaries

HIGH, MEDIUM, LOW = 3, 2, 1
TIER_NAMES = {HIGH: "high", MEDIUM: "medium", LOW: "low"}
REGION = "inside a CUDA graph capture region"
_FALLBACK_LIMIT = 4  # more classes than this define the method: no fallback
# methods of Python's own types: a receiver with no objects calling one is most likely a dict,
# a list or a string, never the tree's class that happens to define the same name


@dataclass(frozen=True)
class Reach:
    tier: int
    entry: str  # why the first function of the chain is reached
    via: tuple[tuple[str, int], ...]  # (unit, call line) from the entry's function to here
    fallback: bool = False


class Contexts:
    def __init__(self, heap: Heap, summaries: Summaries, paths: dict[str, str]) -> None:
        self.heap = heap
        self.summaries = summaries
        self.paths = paths  # module -> display path
        self.reach: dict[str, Reach] = {}
        self.drivers: set[str] = set()
        self.capture_sites: set[str] = set()
        self._methods_by_name: dict[str, list[str]] | None = None
        self._find_capture_sites()
        self._add_driving_callers()
        self._propagate(self._entries())

    # --- entries -----------------------------------------------------------------------------
    def _find_capture_sites(self) -> None:
        heap = self.heap
        for unit in heap.units.values():
            for with_site, inside in unit.regions:
                site = heap.sites[with_site]
                if site.callee is not None and any(o[0] == "graph-context" for o in heap.objects(site.callee)):
                    self.capture_sites.update(inside)
                    self.drivers.add(unit.id)
            capturing = False
            for site in unit.sites:
                names = self._graph_methods(site)
                if api.CAPTURE_BEGIN in names:
                    capturing = True
                    self.drivers.add(unit.id)
                    continue
                if api.CAPTURE_END in names:
                    capturing = False
                    continue
                if capturing:
                    self.capture_sites.add(site.id)

    def _add_driving_callers(self) -> None:
        """A capture cannot begin inside another, nor a graph replay: a function whose calls (as
        resolved, on every object its receivers hold) reach a capture or a replay drives graphs
        and runs outside any capture, like the driver itself (a graph runner's `__call__` that
        captures on a first call and replays after)."""
        heap = self.heap
        for unit in heap.units.values():
            for site in unit.sites:
                if site.callee is not None and any(
                    o[0] == "meth"
                    and (
                        (o[2] == "replay" and o[1][0] == "graph")
                        or (o[2] in api.ACCELERATOR_REPLAYS and o[1][0] == "apicall" and o[1][1] in api.ACCELERATORS)
                    )
                    for o in heap.objects(site.callee)
                ):
                    self.drivers.add(unit.id)
        callers: dict[str, set[str]] = {}
        for unit in heap.units.values():
            for site in unit.sites:
                for target, how in heap.call_targets.get(site.id, ()):
                    if how != "constructor":
                        callers.setdefault(target, set()).add(unit.id)
        work = list(self.drivers)
        while work:
            for caller in callers.get(work.pop(), ()):
                if caller not in self.drivers and heap.units[caller].kind != "module":
                    self.drivers.add(caller)
                    work.append(caller)

    def _graph_methods(self, site: Site) -> set[str]:
        if site.callee is None or site.method not in (api.CAPTURE_BEGIN, api.CAPTURE_END):
            return set()
        objs = self.heap.objects(site.callee)
        if any(o[0] == "meth" and o[1][0] == "graph" for o in objs) or not objs:
            return {site.method}
        return set()

    def _entries(self) -> list[tuple[str, Reach]]:
        heap = self.heap
        entries: list[tuple[str, Reach]] = []
        for site_id in sorted(self.capture_sites):
            site = heap.sites[site_id]
            for target, _ in sorted(heap.call_targets.get(site_id, ())):
                entries.append((target, Reach(HIGH, REGION, ((site.unit, site.line),))))
            if not heap.call_targets.get(site_id):
                for target, tier in self._fallback(site, HIGH):
                    entries.append((target, Reach(tier, REGION, ((site.unit, site.line),), True)))
        for obj in sorted(heap.graphed, key=repr):
            for target in self._callable_units(obj):
                entries.append((target, Reach(HIGH, "graphed by make_graphed_callables", ())))
        # the forward path, when the capture lives outside the tree: the units that run when a
        # module is called, grouped by that module (its forward and the hooks registered on it,
        # or by the same function); a group is offloader-style when any member's effects are
        groups: dict[object, list[tuple[str, str]]] = {}
        for cid, cls in heap.classes.items():
            if heap.is_module_class(cid) or heap.is_autograd_function(cid):
                for obj in heap.objects(f"c:{cid}:forward"):
                    if obj[0] in ("fn", "static"):
                        uid = obj[1] if obj[0] == "fn" else obj[1][1]
                        kind = "nn.Module" if heap.is_module_class(cid) else "autograd Function"
                        groups.setdefault(("class", cid), []).append((uid, f"forward of {kind} {cls.name}"))
        for unit in heap.units.values():
            for site in unit.sites:
                if site.method in api.PRE_HOOK_REGISTRARS | api.POST_HOOK_REGISTRARS and site.args and site.args[0] is not None:
                    receivers = heap.objects(site.receiver) if site.receiver is not None else set()
                    keys = [("class", o[1]) for o in receivers if o[0] == "inst"] or [("registered by", unit.id)]
                    for obj in heap.objects(site.args[0]):
                        for uid in self._callable_units(obj):
                            for key in keys:
                                groups.setdefault(key, []).append((uid, "a registered forward hook"))
        for obj in sorted(heap.hooks, key=repr):
            for uid in self._callable_units(obj):
                groups.setdefault(("hook", uid), []).append((uid, "a registered forward hook"))
        for place in heap.installed:
            for obj in heap.objects(place):
                for uid in self._callable_units(obj):
                    groups.setdefault(("installed", uid), []).append((uid, "an installed forward"))
        for members in groups.values():
            effects = self._effects_outside_drivers([uid for uid, _ in members])
            if effects:
                for uid, why in members:
                    entries.append((uid, Reach(MEDIUM, f"{why} on a forward path that {_effect_words(effects)}", ())))
        # engine-captured code: interfaces a serving engine calls inside its capture
        for cid, cls in heap.classes.items():
            for base in heap.bases_named(cid)[1:]:
                row = engines.BY_BASE.get(base)
                if row is None:
                    continue
                for method in row.methods:
                    for place in heap.class_attribute(cid, method):
                        for obj in heap.objects(place):
                            if obj[0] == "fn":
                                entries.append((obj[1], Reach(MEDIUM, f"{row.why} ({cls.name} derives from {base})", ())))
                        if heap.objects(place):
                            break
        return entries

    def _effects_outside_drivers(self, uids: list[str]) -> frozenset[str]:
        """The effects of `uids` and what they call, leaving out functions that drive graphs: a
        graph runner's warm-up stream is capture machinery, not an offloader's."""
        seen: set[str] = set()
        found: set[str] = set()
        work = [u for u in uids if u not in self.drivers]
        while work:
            uid = work.pop()
            if uid in seen:
                continue
            seen.add(uid)
            found |= self.summaries.own.get(uid, set())
            work.extend(t for t in self.summaries.callees.get(uid, ()) if t not in self.drivers and t not in seen)
        return frozenset(found)

    def _callable_units(self, obj: Obj) -> list[str]:
        heap = self.heap
        kind = obj[0]
        if kind == "fn":
            return [obj[1]]
        if kind == "bound":
            return [obj[1]]
        if kind == "partial":
            return [u for o in heap.objects(("f", obj, "func")) for u in self._callable_units(o)]
        if kind == "inst":
            found = [u for place in heap.class_attribute(obj[1], "forward" if heap.is_module_class(obj[1]) else "__call__") for o in heap.objects(place) for u in self._callable_units(o)]
            return found[:1]
        return []

    # --- propagation -------------------------------------------------------------------------
    def _propagate(self, entries: list[tuple[str, Reach]]) -> None:
        queue: deque[str] = deque()
        for uid, reach in sorted(entries, key=lambda e: -e[1].tier):
            if self._mark(uid, reach):
                queue.append(uid)
        heap = self.heap
        while queue:
            uid = queue.popleft()
            reach = self.reach[uid]
            unit = heap.units.get(uid)
            if unit is None:
                continue
            for site in unit.sites:
                if self._eager_only(site):
                    continue
                targets = heap.call_targets.get(site.id)
                via = (*reach.via, (uid, site.line))
                if targets:
                    for target, _ in sorted(targets):
                        if self._mark(target, Reach(reach.tier, reach.entry, via, reach.fallback)):
                            queue.append(target)
                else:
                    for target, tier in self._fallback(site, reach.tier):
                        if self._mark(target, Reach(tier, reach.entry, via, True)):
                            queue.append(target)
            for target, _ in sorted(heap.unit_edges.get(uid, ())):
                if self._mark(target, Reach(reach.tier, reach.entry, (*reach.via, (uid, unit.line)), reach.fallback)):
                    queue.append(target)

    def _mark(self, uid: str, reach: Reach) -> bool:
        if uid in self.drivers or reach.tier < MEDIUM:
            return False
        unit = self.heap.units.get(uid)
        if unit is None or unit.kind == "class":
            return False
        known = self.reach.get(uid)
        if known is not None and known.tier >= reach.tier:
            return False
        self.reach[uid] = reach
        return True

    def _eager_only(self, site: Site) -> bool:
        """A call that runs only when no capture is under way: a branch not taken while the
        capture flag is set."""
        for place, taken in site.guards:
            if not taken and any(o[0] == "capture-flag" for o in self.heap.objects(place)):
                return True
        return False

    def _fallback(self, site: Site, tier: int) -> list[tuple[str, int]]:
        """An unresolved `x.m(...)`: the tree's methods named m."""
        if site.method is None or site.method in BUILTIN_METHOD_NAMES or site.method.startswith("__") or (site.receiver is not None and self.heap.objects(site.receiver)):
            return []
        if self._methods_by_name is None:
            self._methods_by_name = {}
            for unit in self.heap.units.values():
                if unit.cls is not None and unit.kind == "function":
                    self._methods_by_name.setdefault(unit.name, []).append(unit.id)
        found = self._methods_by_name.get(site.method, [])
        if not found or len(found) > _FALLBACK_LIMIT:
            return []
        # one tier lower (DESIGN): a name alone, even defined once, is weaker evidence than objects
        return [(uid, tier - 1) for uid in found]

    # --- reading -----------------------------------------------------------------------------
    def chain(self, uid: str) -> str:
        """`called from pkg.mod.f ← pkg.run.capture (inside a CUDA graph capture region)`: the
        callers from the nearest back to the entry, then why the entry is reached. Worded as the
        per-file analysis words the same chain: a caller of the same module by its local name,
        a capture region of the same module as "called inside" its first callee."""
        reach = self.reach[uid]
        module = self.heap.units[uid].module
        via = list(reach.via)
        entry = reach.entry
        if reach.entry == REGION and via and self.heap.units[via[0][0]].module == module:
            via, entry = via[1:], f"called {REGION}"
        if not via:
            return entry
        names = []
        for caller, _ in reversed(via):
            unit = self.heap.units[caller]
            names.append(unit.qualname if unit.module == module and unit.kind != "module" else self._dotted(caller))
        return f"called from {' ← '.join(names)} ({entry})"

    def _dotted(self, uid: str) -> str:
        unit = self.heap.units[uid]
        return unit.module if unit.kind == "module" else f"{unit.module}.{unit.qualname}"

    def reached(self) -> dict[str, Reach]:
        return dict(self.reach)


def _effect_words(effects: frozenset[str]) -> str:
    words = []
    if "stream" in effects:
        words.append("orders work on CUDA streams or events")
    if "host-copy" in effects:
        words.append("copies host-resident tensors to the device")
    return " and ".join(words)


def unit_tier(contexts: Contexts, unit: Unit) -> str | None:
    reach = contexts.reach.get(unit.id)
    return TIER_NAMES[reach.tier] if reach is not None else None
