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

import ast
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass

from offlint.analysis.guard import compile_quietly
from offlint.diagnostics import Confidence
from offlint.semantics.names import ModuleNames
from offlint.semantics.names import absolute_module as _absolute

__all__ = ["ModuleNames", "Seed", "cross_module_seeds"]

_CALLED_FROM = "called from "
# what a call hands its callee's parameters: ((parameter: its name, or "#<position>"), kind), …
Handed = tuple[tuple[str, str], ...]
# (qualname, confidence or "", reason, ((imported callee, called inside a capture region, handed), …))
IndexEntry = tuple[str, str, str, tuple[tuple[str, bool, Handed], ...]]
ModuleIndex = tuple[IndexEntry, ...]
# marks in an index, entries with no calls (no Python name starts with "<"): the module captures
# in segments (defines, enters or marks eager breaks of a segmented capture); the module forks a
# side stream with an event in capture-reachable code and leaves the join to a capture-aware
# join of a later call, which a segment's end may precede
SEGMENTED_CAPTURE: IndexEntry = ("<segmented-capture>", "", "", ())
DEFERRED_EVENT_FORK: IndexEntry = ("<deferred-event-fork>", "", "", ())


_SEGMENTED_WORDS = ("class BreakableCUDAGraphCapture", "eager_break_during_capture", "eager_on_graph(")


def marks_of_unanalysed(text: str, path: str) -> ModuleIndex:
    """The index of a file the prefilter settles unparsed: its segmented-capture mark, read from
    the text (the class that captures in segments, or an eager-break marker), and what a package
    `__init__.py` re-exports."""
    marks = (SEGMENTED_CAPTURE,) if any(word in text for word in _SEGMENTED_WORDS) else ()
    return marks + reexports_of(text, path)


_REEXPORT = "<reexport>"


def reexports_of(text: str, path: str) -> ModuleIndex:
    """What a package's `__init__.py` imports from its modules (`from .modeling import f`): a
    call of `pkg.f` elsewhere is a call of `pkg.modeling.f`. One entry per name: the name after
    the mark, the import's target (relative as written) as the reason."""
    if os.path.basename(path) != "__init__.py" or "import" not in text:
        return ()
    try:
        tree = compile_quietly(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    entries: list[IndexEntry] = []
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        source = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name != "*":
                target = f"{source}.{alias.name}" if node.module else f"{source}{alias.name}"
                entries.append((f"{_REEXPORT}{alias.asname or alias.name}", "", target, ()))
    return tuple(entries)


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
    # the kinds (streams, events, host tensors) the reaching calls hand its parameters, where
    # every reaching call that passes a parameter agrees (`Handed`)
    handed: Handed = ()


def cross_module_seeds(
    indexes: Mapping[str, tuple[str, bool, ModuleIndex]],
    modules: Mapping[str, str],
) -> dict[str, tuple[Seed, ...]]:
    """`indexes`: file key -> (its module name, whether it is a package `__init__`, its index);
    `modules`: module name -> file key, for every file of the tree. Returns, per file key, the
    functions other modules make `high` (one step: the run re-analyses the seeded files, whose
    new indexes carry the reach further)."""
    seeds: dict[str, dict[str, Seed]] = {}
    handed: dict[tuple[str, str], list[Handed]] = {}
    reexports = {
        key: {
            qualname.removeprefix(_REEXPORT): _absolute(reason, module, is_package)
            for qualname, _, reason, _ in index
            if qualname.startswith(_REEXPORT)
        }
        for key, (module, is_package, index) in indexes.items()
    }
    for key, (module, is_package, index) in sorted(indexes.items()):  # the same seeds every run
        for qualname, confidence, reason, edges in index:
            for target, inside, passed in edges:
                if not inside and confidence not in (Confidence.HIGH.value, Confidence.MEDIUM.value):
                    continue
                found = _through_reexports(_resolve(_absolute(target, module, is_package), modules), modules, reexports)
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
                handed.setdefault((file_key, local), []).append(passed)
    return {
        key: tuple(
            sorted(
                (dataclasses.replace(seed, handed=_agreed(handed[(key, seed.qualname)])) for seed in found.values()),
                key=lambda s: s.qualname,
            )
        )
        for key, found in seeds.items()
    }


def _through_reexports(
    found: tuple[str, str] | None, modules: Mapping[str, str], reexports: Mapping[str, Mapping[str, str]]
) -> tuple[str, str] | None:
    """Follow `pkg.f` to `pkg.modeling.f` when the package's `__init__.py` re-exports it (a few
    packages deep)."""
    for _ in range(4):
        if found is None:
            return None
        file_key, local = found
        head, _, rest = local.partition(".")
        target = reexports.get(file_key, {}).get(head)
        if target is None:
            return found
        found = _resolve(f"{target}.{rest}" if rest else target, modules)
    return found


def _agreed(calls: list[Handed]) -> Handed:
    """The parameters every call that passes them hands the same kind."""
    kinds: dict[str, set[str]] = {}
    for passed in calls:
        for parameter, kind in passed:
            kinds.setdefault(parameter, set()).add(kind)
    return tuple(sorted((parameter, found.pop()) for parameter, found in kinds.items() if len(found) == 1))


def _resolve(dotted: str, modules: Mapping[str, str]) -> tuple[str, str] | None:
    """The file and local qualified name of `pkg.mod.Class.method`: the longest module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        file_key = modules.get(".".join(parts[:cut]))
        if file_key is not None:
            return file_key, ".".join(parts[cut:])
    return None
