"""The project call graph: capture regions reach functions of other modules of the checked tree.

Each analysed file leaves a small index on its report (`module_index.py`): for every function,
how surely capture reaches it and the imported functions it calls where capture is possible. The
run joins the indexes here (`cross_module_seeds`): a function another module calls from a capture
region, or from code a capture region reaches, is `high` in its own module too, with the caller
named in its note. `medium` crosses modules only from offloading hooks (installed hooks and
forwards, model hook protocols): a model forward's callees elsewhere would be every helper a
model calls, which the engines' graph runners do not all capture (prefill paths).

Files are named by their dotted module (`pkg/sub/mod.py` is `pkg.sub.mod` while each folder
holds an `__init__.py`); calls resolve through `import` and `from … import` (relative ones too).
This module imports no libcst: a warm run joins cached indexes without parsing anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from offlint.diagnostics import Confidence

_CALLED_FROM = "called from "
# (qualname, confidence or "", reason, ((imported callee, called inside a capture region), …))
IndexEntry = tuple[str, str, str, tuple[tuple[str, bool], ...]]
ModuleIndex = tuple[IndexEntry, ...]
# marks in an index, entries with no calls (no Python name starts with "<"): the module captures
# in segments (defines, enters or marks eager breaks of a segmented capture); the module forks a
# side stream with an event in capture-reachable code and leaves the join to a capture-aware
# join of a later call, which a segment's end may precede
SEGMENTED_CAPTURE: IndexEntry = ("<segmented-capture>", "", "", ())
DEFERRED_EVENT_FORK: IndexEntry = ("<deferred-event-fork>", "", "", ())


_SEGMENTED_WORDS = ("class BreakableCUDAGraphCapture", "eager_break_during_capture", "eager_on_graph(")


def marks_of_unanalysed(text: str) -> ModuleIndex:
    """The index of a file the prefilter settles unparsed: its segmented-capture mark, read from
    the text (the class that captures in segments, or an eager-break marker)."""
    return (SEGMENTED_CAPTURE,) if any(word in text for word in _SEGMENTED_WORDS) else ()


def files_to_recheck_for_segments(indexes: Mapping[str, ModuleIndex]) -> list[str]:
    """The files whose deferred event forks are OFL103 findings once the tree is known to
    capture in segments (event forks are not joined at a segment's end); none if it does not."""
    if not any(SEGMENTED_CAPTURE in index for index in indexes.values()):
        return []
    return sorted(key for key, index in indexes.items() if DEFERRED_EVENT_FORK in index)


@dataclass(frozen=True)
class Seed:
    """A function of this module that is capture-reachable for a reason found elsewhere (another
    module's capture region): its local qualified name, tier and the reason."""

    qualname: str
    confidence: Confidence
    reason: str


class ModuleNames:
    """Dotted module names of files, by the `__init__.py` files above them (memoised per folder)."""

    def __init__(self) -> None:
        self._packages: dict[str, str | None] = {}

    def of(self, real_path: str) -> str | None:
        folder, name = os.path.split(real_path)
        if not name.endswith(".py"):
            return None
        stem = name[:-3]
        package = self._package(folder)
        if stem == "__init__":
            return package
        return f"{package}.{stem}" if package else stem

    def _package(self, folder: str) -> str | None:
        if folder in self._packages:
            return self._packages[folder]
        found: str | None = None
        if os.path.isfile(os.path.join(folder, "__init__.py")):
            parent, name = os.path.split(folder)
            above = self._package(parent) if parent != folder else None
            found = f"{above}.{name}" if above else name
        self._packages[folder] = found
        return found


def _absolute(target: str, module: str, is_package: bool) -> str:
    """`..mod.f` written in `pkg.sub.this` is `pkg.mod.f`."""
    if not target.startswith("."):
        return target
    level = len(target) - len(target.lstrip("."))
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    rest = target[level:]
    return ".".join([*parts, rest]) if rest else ".".join(parts)


def cross_module_seeds(
    indexes: Mapping[str, tuple[str, bool, ModuleIndex]],
    modules: Mapping[str, str],
) -> dict[str, tuple[Seed, ...]]:
    """`indexes`: file key -> (its module name, whether it is a package `__init__`, its index);
    `modules`: module name -> file key, for every file of the tree. Returns, per file key, the
    functions other modules make `high` (one step: the run re-analyses the seeded files, whose
    new indexes carry the reach further)."""
    seeds: dict[str, dict[str, Seed]] = {}
    for key, (module, is_package, index) in sorted(indexes.items()):  # the same seeds every run
        for qualname, confidence, reason, edges in index:
            for target, inside in edges:
                if not inside and confidence not in (Confidence.HIGH.value, Confidence.MEDIUM.value):
                    continue
                found = _resolve(_absolute(target, module, is_package), modules)
                if found is None:
                    continue
                file_key, local = found
                if file_key == key:
                    continue
                caller = f"{module}.{qualname}"
                if inside:
                    why = f"called from {caller} (inside a CUDA graph capture region)"
                elif reason.startswith(_CALLED_FROM):
                    why = f"called from {caller} ← {reason.removeprefix(_CALLED_FROM)}"
                else:
                    why = f"called from {caller} ({reason})"
                seed = Seed(local, Confidence.HIGH if inside else Confidence(confidence), why)
                seeds.setdefault(file_key, {}).setdefault(local, seed)
    return {key: tuple(sorted(found.values(), key=lambda s: s.qualname)) for key, found in seeds.items()}


def _resolve(dotted: str, modules: Mapping[str, str]) -> tuple[str, str] | None:
    """The file and local qualified name of `pkg.mod.Class.method`: the longest module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        file_key = modules.get(".".join(parts[:cut]))
        if file_key is not None:
            return file_key, ".".join(parts[cut:])
    return None
