"""Layer 3: the abstract heap. Which objects each place can hold, solved over the whole tree.

Objects are tuples named by their kind and allocation site:

    ("fn", unit)  ("cls", class)  ("inst", class)  ("bound", unit, self)  ("mod", module)
    ("api", dotted)  ("apicall", dotted)  ("apiinst", dotted, site)
    ("stream", site)  ("event", site, external, timing)  ("current-stream",)  ("default-stream",)
    ("stream-context", site)  ("graph", site)  ("graph-context", site)  ("capture-flag",)
    ("host", site, pinned)  ("device", site)  ("container", ...)  ("partial", site)
    ("gen", unit)  ("cmfactory", unit)  ("cm", unit)  ("prop", unit)  ("static", obj)
    ("classm", obj)  ("sup", class, self)  ("apply", class)  ("meth", obj, name)  ("identity",)
    ("thread", site)

Places hold sets of them (flow-insensitive, field-sensitive: `("f", obj, attr)` is attribute
`attr` of `obj`, `("e", obj)` its elements; a module's attribute is its global, a class's its
body's name). Assignments, loads, stores, element accesses and calls are inclusion constraints,
solved on a worklist; a call resolves when its callee place gains an object (`calls.py`).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from offlint.semantics.lowered import ClassDef, LoweredFile, Site, Unit
from offlint.semantics.protocols import torch as api

Obj = tuple[Any, ...]
Node = Any  # a place string, or a field/element tuple

# objects whose attribute loads are methods of a built-in type
BUILTIN_KINDS = frozenset(
    {"stream", "event", "current-stream", "default-stream", "stream-context", "graph", "graph-context",
     "host", "device", "container", "apiinst", "thread", "capture-flag", "apicall"}
)
CONTAINER_KINDS = frozenset({"container", "partial"})
# methods of Python's own types: a receiver calling one is most likely a dict, a list or a string
BUILTIN_METHOD_NAMES = frozenset(name for t in (dict, list, str, set, tuple, bytes, int, float) for name in dir(t))
# a cap on one place's objects: past it, new objects are dropped and the place is marked widened
MAX_OBJECTS = 256


class Heap:
    """The solver. `solve()` runs the constraints of every lowered file to a fixpoint."""

    def __init__(self, files: Iterable[LoweredFile], budget: int = 3_000_000) -> None:
        self.files = list(files)
        self.budget = budget  # handler applications
        self.steps = 0
        self.cut = False
        self.guessed: set[Node] = set()  # places given an instance by the unique-definer fallback
        self.units: dict[str, Unit] = {}
        self.classes: dict[str, ClassDef] = {}
        self.module_globals: dict[str, frozenset[str]] = {}
        for lowered in self.files:
            self.module_globals[lowered.module] = lowered.globals
            for unit in lowered.units:
                self.units[unit.id] = unit
            for cls in lowered.classes:
                self.classes[cls.id] = cls
        self.modules = frozenset(self.module_globals)
        self.pts: dict[Node, set[Obj]] = {}
        self.edges: dict[Node, set[Node]] = {}
        self.constraints: dict[Node, list[tuple[Callable[[Obj], None], ...]]] = {}
        self.pending: dict[Node, set[Obj]] = {}
        self.queue: deque[Node] = deque()
        self.later: deque[tuple[Callable[[Obj], None], list[Obj]]] = deque()
        self.widened: set[Node] = set()
        self.class_bases: dict[str, list[Node]] = {}
        self._mro: dict[str, tuple[list[str], list[str]]] = {}
        # what the contexts and summaries layers read
        self.call_targets: dict[str, set[tuple[str, str]]] = {}  # site -> {(unit, how)}
        self.hooks: set[Obj] = set()  # callables registered as forward hooks
        self.installed: list[Node] = []  # places stored into some object's `forward`
        self.graphed: set[Obj] = set()  # callables handed to make_graphed_callables
        self.thread_targets: list[tuple[Site, Node]] = []
        self.partial_keywords: dict[Obj, tuple[str, ...]] = {}
        self.partial_calls: set[tuple[str, Obj]] = set()
        # calls no call site makes: a load that runs a property getter (unit -> {(unit, how)})
        self.unit_edges: dict[str, set[tuple[str, str]]] = {}
        self.sites: dict[str, Site] = {s.id: s for u in self.units.values() for s in u.sites}
        for name in ("property", "staticmethod", "classmethod", "getattr", "setattr", "super", "iter", "next",
                     "list", "tuple", "dict", "reversed", "sorted", "enumerate", "zip"):
            self.add(f"b:{name}", [("api", f"builtins.{name}")])

    # --- the worklist ------------------------------------------------------------------------
    def add(self, node: Node, objs: Iterable[Obj]) -> None:
        held = self.pts.get(node)
        if held is None:
            held = self.pts[node] = set()
        new = [o for o in objs if o not in held]
        if not new:
            return
        if len(held) + len(new) > MAX_OBJECTS:
            self.widened.add(node)
            new = new[: max(0, MAX_OBJECTS - len(held))]
            if not new:
                return
        held.update(new)
        waiting = self.pending.get(node)
        if waiting is None:
            self.pending[node] = set(new)
            self.queue.append(node)
        else:
            waiting.update(new)

    def copy(self, dst: Node, src: Node) -> None:
        if src is None or dst is None or src == dst:
            return
        out = self.edges.setdefault(src, set())
        if dst in out:
            return
        out.add(dst)
        held = self.pts.get(src)
        if held:
            self.add(dst, list(held))

    def on(self, node: Node, handler: Callable[[Obj], None]) -> None:
        """Run `handler` for every object `node` holds, now and later."""
        self.constraints.setdefault(node, []).append((handler,))
        held = self.pts.get(node)
        if held:  # applied from the worklist, not here: call chains never recurse deeply
            self.later.append((handler, list(held)))

    def objects(self, node: Node) -> set[Obj]:
        return self.pts.get(node, set())

    def run(self) -> None:
        """To the fixpoint, or until the step budget is spent. Every constraint is monotone, so a
        cut solve holds a subset of the full answer: what it reaches is reached (`cut` says the
        answer may be incomplete, and the per-file analysis keeps its own reach beside it)."""
        steps = self.steps
        while self.queue or self.later:
            if steps > self.budget:
                self.cut = True
                break
            if self.later:
                handler, objs = self.later.popleft()
                steps += len(objs)
                for obj in objs:
                    handler(obj)
                continue
            node = self.queue.popleft()
            delta = self.pending.pop(node, None)
            if not delta:
                continue
            for dst in list(self.edges.get(node, ())):
                self.add(dst, delta)
            for (handler,) in list(self.constraints.get(node, ())):
                steps += len(delta)
                for obj in delta:
                    handler(obj)
        self.steps = steps

    # --- solving -----------------------------------------------------------------------------
    def solve(self, apply: Callable[[Heap, Unit, tuple], None]) -> None:
        """`apply`: each instruction's constraints (`calls.apply`)."""
        for lowered in self.files:
            for unit in lowered.units:
                for instruction in unit.instructions:
                    apply(self, unit, instruction)
        self.run()
        # a method's `self` is an instance of its class or of a class deriving from it, whether
        # or not the tree shows the call (the engine calls `forward`): seeded once the bases are known
        self._seed_self()
        self.run()
        # a receiver no object reaches, used with a method or property that one class of the
        # tree alone defines, is an instance of that class (an untyped parameter)
        for _ in range(2):
            if self.cut or not self._guess_receivers():
                break
            self.run()
        # a class's bases may resolve late (an import cycle, a base held by a variable): when the
        # method resolution orders change, the loads and calls that read them are replayed
        for _ in range(3):
            if self.cut:
                break
            before = {cid: self.mro(cid) for cid in self.classes}
            self._mro.clear()
            after = {cid: self.mro(cid) for cid in self.classes}
            if before == after:
                break
            for node, handlers in list(self.constraints.items()):
                for (handler,) in list(handlers):
                    for obj in list(self.pts.get(node, ())):
                        handler(obj)
            self.run()

    def _class_places(self) -> dict[str, list[str]]:
        """Each class's body places (its attributes), from the class bodies' stores."""
        found: dict[str, list[str]] = {}
        for cid, cls in self.classes.items():
            body = self.units.get(cls.body)
            if body is None:
                continue
            prefix = f"c:{cid}:"
            found[cid] = sorted({i[1] for i in body.instructions if i[0] == "copy" and isinstance(i[1], str) and i[1].startswith(prefix)})
        return found

    def _seed_self(self) -> None:
        places = self._class_places()
        for cid in self.classes:
            instance: Obj = ("inst", cid)
            for ancestor in self.mro(cid)[0]:
                for place in places.get(ancestor, ()):
                    self.on(place, functools.partial(self._bind_self, instance))

    def _bind_self(self, instance: Obj, member: Obj) -> None:
        if member[0] == "fn" or member[0] == "prop":
            unit = self.units.get(member[1])
            if unit is not None and unit.params and unit.kind == "function":
                self.add(unit.params[0], [instance])
        elif member[0] == "classm" and member[1][0] == "fn":
            unit = self.units.get(member[1][1])
            if unit is not None and unit.params:
                self.add(unit.params[0], [("cls", instance[1])])

    def _guess_receivers(self) -> bool:
        """Give each empty receiver of a load the instance of the one tree class defining that
        attribute as a method or property. True when anything was added."""
        definers: dict[str, set[str]] = {}
        for cid, places in self._class_places().items():
            for place in places:
                name = place.rsplit(":", 1)[1]
                if name.startswith("__") or name in BUILTIN_METHOD_NAMES:
                    continue
                if any(o[0] in ("fn", "prop", "classm", "static") for o in self.objects(place)):
                    definers.setdefault(name, set()).add(cid)
        changed = False
        for lowered in self.files:
            for unit in lowered.units:
                for instruction in unit.instructions:
                    if instruction[0] != "load":
                        continue
                    _, _, src, attr = instruction
                    owners = definers.get(attr)
                    if owners is None or len(owners) != 1 or self._known(src):
                        continue
                    if not (isinstance(src, str) and src[:2] in ("l:", "t:")):
                        continue  # parameters, locals and what a load gave: globals stay as solved
                    (owner,) = owners
                    self.guessed.add(src)
                    self.add(src, [("inst", owner)])
                    changed = True
        return changed

    def _known(self, place: Node) -> bool:
        """The place holds an object: of the tree, or an external library's result (never guessed
        over); a torch method placeholder alone (`self.slot` on a module) is no object."""
        return any(o[0] != "meth" for o in self.pts.get(place, ()))

    # --- classes -----------------------------------------------------------------------------
    def mro(self, cid: str) -> tuple[list[str], list[str]]:
        """The tree classes of `cid`'s method resolution order (itself first) and the external
        bases (dotted names) reached through them."""
        found = self._mro.get(cid)
        if found is not None:
            return found
        self._mro[cid] = ([cid], [])  # a cycle in bases ends here
        tree: list[str] = [cid]
        external: list[str] = []
        for base in self.class_bases.get(cid, ()):
            for obj in sorted(self.objects(base), key=repr):
                if obj[0] == "cls":
                    inner, outer = self.mro(obj[1])
                    tree.extend(c for c in inner if c not in tree)
                    external.extend(e for e in outer if e not in external)
                elif obj[0] == "api" and obj[1] not in external:
                    external.append(api.canonical(obj[1]))
        self._mro[cid] = (tree, external)
        return tree, external

    def dotted(self, cid: str) -> str:
        cls = self.classes[cid]
        return f"{cls.module}.{cls.qualname}"

    def bases_named(self, cid: str) -> list[str]:
        """Every base's dotted name (tree classes by module and name, external ones as imported)."""
        tree, external = self.mro(cid)
        return [self.dotted(c) for c in tree] + external

    def is_module_class(self, cid: str) -> bool:
        return any(api.is_module_class(name) for name in self.mro(cid)[1])

    def is_autograd_function(self, cid: str) -> bool:
        return any(name in api.AUTOGRAD_FUNCTION_BASES for name in self.mro(cid)[1])

    def class_attribute(self, cid: str, attr: str, after: str | None = None) -> list[Node]:
        """The class-body places an attribute lookup on an instance of `cid` reads, in MRO order
        (after `after`, for super())."""
        tree, _ = self.mro(cid)
        if after is not None:
            tree = tree[tree.index(after) + 1:] if after in tree else []
        return [f"c:{c}:{attr}" for c in tree]

    def field(self, obj: Obj, attr: str) -> Node:
        if obj[0] == "mod":
            return f"g:{obj[1]}:{attr}"
        if obj[0] == "cls":
            return f"c:{obj[1]}:{attr}"
        return ("f", obj, attr)
