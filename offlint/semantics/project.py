"""The semantic core over one tree: lower each file, solve the heap, summarise, find contexts."""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from offlint.semantics.calls import apply
from offlint.semantics.contexts import TIER_NAMES, Contexts
from offlint.semantics.heap import Heap
from offlint.semantics.lowered import LoweredFile, from_json, lower, to_json
from offlint.semantics.names import ModuleNames, absolute_module
from offlint.semantics.protocols import engines
from offlint.semantics.protocols import torch as api
from offlint.semantics.summaries import Summaries

# files larger than this are not lowered (the analysis budget refuses them too)
MAX_LOWERED_BYTES = 3_000_000
_LOWERING_VERSION = "5"


@dataclass
class SourceFile:
    """A file of the tree. Its text is read only when the core needs it: a file whose facts and
    lowered form are cached under the same stat is never read."""

    display: str
    real: str
    read: Callable[[], bytes | None]
    stat: tuple[int, ...] | None = None  # size, mtime, ctime, inode: what the facts index keys on
    _text: bytes | None = None

    @classmethod
    def of_text(cls, display: str, real: str, text: bytes) -> SourceFile:
        return cls(display, real, lambda: text)

    @property
    def text(self) -> bytes:
        if self._text is None:
            self._text = self.read() or b""
        return self._text


@dataclass(frozen=True)
class FileFacts:
    """What the slice is chosen by, per file: kept in an index by stat, so unchanged files are
    not read again."""

    digest: str
    screened: bool  # its words show streams, events, graphs, pinning or an engine interface
    has_forward: bool
    imports: tuple[str, ...]  # the modules its import lines name, relative ones as written
    size: int


def file_facts(text: bytes) -> FileFacts:
    digest = hashlib.blake2b(text, digest_size=16).hexdigest()
    return FileFacts(digest, bool(_screen().search(text)), b"def forward" in text, tuple(_imported_names(text)), len(text))


@dataclass(frozen=True)
class Reached:
    """A function capture reaches: its local name, tier and the chain that reaches it."""

    qualname: str
    tier: str
    reason: str


@dataclass
class Core:
    heap: Heap
    summaries: Summaries
    contexts: Contexts
    displays: dict[str, str]  # module -> display path
    not_lowered: list[str]  # modules of the slice left out by the size budget

    @property
    def incomplete(self) -> str | None:
        """Why the answer may miss reach (a budget was spent), or None."""
        if self.heap.cut:
            return f"the solve stopped at its budget of {self.heap.budget} steps"
        if self.not_lowered:
            return f"{len(self.not_lowered)} modules of the slice were not lowered (size budget)"
        return None

    def hints_by_file(self) -> dict[str, list[tuple[str, str, str]]]:
        """display -> (function, receiver source, kind) for the receivers of reached functions'
        stream, event and copy calls whose objects all agree on one kind."""
        found: dict[str, list[tuple[str, str, str]]] = {}
        for uid in self.contexts.reached():
            unit = self.heap.units[uid]
            display = self.displays.get(unit.module)
            if display is None or unit.kind != "function":
                continue
            for site in unit.sites:
                if site.receiver_text is not None and site.receiver is not None:
                    kind = _kind_of(self.heap.objects(site.receiver))
                    if kind is not None:
                        found.setdefault(display, []).append((unit.qualname, site.receiver_text, kind))
                if site.data_text is not None and site.args and site.args[0] is not None:
                    objects = self.heap.objects(site.args[0])
                    # Python data (a list, a tuple) handed to `torch.tensor(..., device=)` is
                    # staged in pageable host memory before the copy
                    if objects and all(o[0] == "container" for o in objects):
                        found.setdefault(display, []).append((unit.qualname, site.data_text, "pageable host tensor"))
        return {display: sorted(set(items)) for display, items in found.items()}

    def reached_by_file(self) -> dict[str, list[Reached]]:
        found: dict[str, list[Reached]] = {}
        for uid, reach in self.contexts.reached().items():
            unit = self.heap.units[uid]
            if unit.kind != "function":
                continue
            display = self.displays.get(unit.module)
            if display is None:
                continue
            found.setdefault(display, []).append(Reached(unit.qualname, TIER_NAMES[reach.tier], self.contexts.chain(uid)))
        for entries in found.values():
            entries.sort(key=lambda r: r.qualname)
        return found


def _kind_of(objects: set[tuple]) -> str | None:
    """One kind for all of a receiver's tracked objects, in the per-file analysis' words."""
    kinds = set()
    for obj in objects:
        if obj[0] in ("stream", "current-stream", "default-stream"):
            kinds.add("stream")
        elif obj[0] == "event":
            kinds.add("external event" if obj[2] else "event")
        elif obj[0] == "host":
            kinds.add("pinned host tensor" if obj[2] else "pageable host tensor")
        elif obj[0] not in ("meth", "apicall"):
            return None
    return kinds.pop() if len(kinds) == 1 else None


def lower_source(
    text: bytes, module: str, display: str, is_package: bool, prepare: Callable[[bytes], bytes] | None = None
) -> LoweredFile | None:
    """`prepare`: what the parser is handed instead of `text` (the pipeline empties literal
    tables, keeping every other line's number and columns)."""
    if len(text) > MAX_LOWERED_BYTES:
        return None
    parsed = prepare(text) if prepare is not None else text
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(parsed, display)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        return lower(tree, module, display, is_package, text)
    except RecursionError:
        return None


class LoweredStore:
    """What the core keeps between runs, in memory: each file's slice facts by stat, and lowered
    files by content digest. The pipeline loads and saves it as JSON in the cache folder (its
    guards, its engine key: `pipeline/tree_reach.py`); nothing here touches the disk."""

    def __init__(self, facts: dict[str, Any] | None = None, lowered: dict[str, Any] | None = None) -> None:
        self.index: dict[str, list[Any]] = dict(facts or {})  # real -> [*stat, digest, screened, forward, imports, size]
        self.lowered_json: dict[str, Any] = dict(lowered or {})  # key -> to_json(...) or None
        self.used: set[str] = set()
        self.changed = False

    def facts(self, source: SourceFile) -> FileFacts:
        row = self.index.get(source.real)
        if source.stat is not None and isinstance(row, list) and len(row) == 9 and tuple(row[:4]) == source.stat:
            return FileFacts(row[4], bool(row[5]), bool(row[6]), tuple(row[7]), int(row[8]))
        found = file_facts(source.text)
        if source.stat is not None:
            self.index[source.real] = [*source.stat, found.digest, found.screened, found.has_forward, list(found.imports), found.size]
            self.changed = True
        return found

    @staticmethod
    def _key(digest: str, module: str, is_package: bool) -> str:
        return f"{digest}:{module}:{int(is_package)}:{_LOWERING_VERSION}"

    def get(self, digest: str, module: str, is_package: bool, display: str) -> LoweredFile | bool | None:
        key = self._key(digest, module, is_package)
        if key not in self.lowered_json:
            return False
        self.used.add(key)
        raw = self.lowered_json[key]
        if raw is None:
            return None
        try:
            return from_json(raw, display)
        except (KeyError, TypeError, ValueError, IndexError):
            return False

    def put(self, digest: str, module: str, is_package: bool, lowered: LoweredFile | None) -> None:
        key = self._key(digest, module, is_package)
        self.lowered_json[key] = to_json(lowered) if lowered is not None else None
        self.used.add(key)
        self.changed = True

    def kept_lowered(self) -> dict[str, Any]:
        """The lowered files this run used: what is worth saving."""
        return {key: value for key, value in self.lowered_json.items() if key in self.used}


@functools.cache
def _screen() -> re.Pattern[bytes]:
    bases = "|".join(sorted({re.escape(row.base.rsplit(".", 1)[1]) for row in engines.INTERFACES}))
    return re.compile(f"{api.SLICE_WORDS}|{bases}".encode())


_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import|import[ \t]+([\w.]+))", re.MULTILINE)


# the slice lowered and solved; past these the answer is cut (a subset of the full reach)
MAX_INSTRUCTIONS = 120_000
SOLVE_BUDGET = 600_000


def build(
    files: Iterable[SourceFile],
    store: LoweredStore | None = None,
    *,
    max_instructions: int = MAX_INSTRUCTIONS,
    budget: int = SOLVE_BUDGET,
    prepare: Callable[[bytes], bytes] | None = None,
) -> Core:
    """The core over the slice of `files` that can matter: the files whose words show streams,
    events, graphs, pinning or an engine interface; the tree modules they import; and the files
    that import them and define a `forward` (a wrapper module one call away)."""
    names = ModuleNames()
    cache = store if store is not None else LoweredStore()
    modules: dict[str, tuple[SourceFile, bool, FileFacts]] = {}
    ambiguous: set[str] = set()
    for source in files:
        module = names.of(source.real)
        if module is None:
            continue
        if module in modules:
            # two files of one name (loose scripts of several projects side by side): an import
            # of it cannot be resolved, so neither is part of the slice
            ambiguous.add(module)
            continue
        modules[module] = (source, os.path.basename(source.real) == "__init__.py", cache.facts(source))
    for module in ambiguous:
        del modules[module]
    chosen = {m for m, (_, _, facts) in modules.items() if facts.screened}
    lowered: dict[str, LoweredFile] = {}
    cut: list[str] = []
    size = [0]

    def lower_modules(wanted: Iterable[str]) -> None:
        for module in sorted(wanted, key=lambda m: modules[m][2].size if m in modules else 0):
            if module in lowered or module not in modules:
                continue
            if size[0] > max_instructions:
                cut.append(module)
                continue
            source, is_package, facts = modules[module]
            found = cache.get(facts.digest, module, is_package, source.display)
            if found is False:
                found = lower_source(source.text, module, source.display, is_package, prepare)
                cache.put(facts.digest, module, is_package, found)
            if isinstance(found, LoweredFile):
                lowered[module] = found
                size[0] += sum(len(unit.instructions) for unit in found.units)

    lower_modules(chosen)
    # what the starting files import: base classes, helpers, the objects they are handed
    lower_modules({m for found in list(lowered.values()) for m in _imports_of(found, modules)})
    # the packages that re-export them (`from .offloader import Offloader` in `__init__.py`)
    exporters = {
        module
        for module, (_, is_package, facts) in modules.items()
        if is_package and any(absolute_module(name, module, is_package) in chosen for name in facts.imports)
    }
    lower_modules(exporters)
    # the files that import either and define a forward (a wrapper module one call away)
    reached = chosen | exporters
    lower_modules(
        module
        for module, (_, is_package, facts) in modules.items()
        if module not in lowered
        and facts.has_forward
        and any(absolute_module(name, module, is_package) in reached for name in facts.imports)
    )
    displays = {module: found.path for module, found in lowered.items()}
    heap = Heap(lowered.values(), budget)
    heap.solve(apply)
    summaries = Summaries(heap)
    contexts = Contexts(heap, summaries, displays)
    return Core(heap, summaries, contexts, displays, cut)


def _imports_of(found: LoweredFile, modules: dict[str, tuple[SourceFile, bool, FileFacts]]) -> set[str]:
    wanted: set[str] = set()
    for unit in found.units:
        for instruction in unit.instructions:
            if instruction[0] in ("import", "star"):
                module = instruction[2] if instruction[0] == "import" else instruction[1]
                name = instruction[3] if instruction[0] == "import" else None
                if name is not None and f"{module}.{name}" in modules:
                    wanted.add(f"{module}.{name}")
                elif module in modules:
                    wanted.add(module)
    return wanted


def _imported_names(text: bytes) -> list[str]:
    return [(a or b).decode("ascii", "replace") for a, b in _IMPORT_LINE.findall(text)]
