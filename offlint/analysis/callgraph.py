"""The project call graph: capture regions reach functions of other modules of the checked tree.

Each analysed file leaves a small index on its report (`module_index`): for every function, how
surely capture reaches it and the imported functions it calls where capture is possible. The run
joins the indexes (`cross_module_seeds`): a function another module calls from a capture region,
or from code a capture region reaches, is `high` in its own module too, with the caller named in
its note. `medium` crosses modules only from offloading hooks (installed hooks and forwards, model
hook protocols): a model forward's callees elsewhere would be every helper a model calls, which
the engines' graph runners do not all capture (prefill paths).

Files are named by their dotted module (`pkg/sub/mod.py` is `pkg.sub.mod` while each folder
holds an `__init__.py`); calls resolve through `import` and `from … import` (relative ones too).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import libcst as cst

from offlint.analysis.imports import dotted_name
from offlint.analysis.reachability import HOOK_REASON, Seed
from offlint.analysis.syntax import walk
from offlint.diagnostics import Confidence

if TYPE_CHECKING:
    from offlint.analysis.model import FunctionInfo, ModuleModel

# (qualname, confidence or "", reason, ((imported callee, called inside a capture region), …))
_CALLED_FROM = "called from "
IndexEntry = tuple[str, str, str, tuple[tuple[str, bool], ...]]
ModuleIndex = tuple[IndexEntry, ...]


def module_index(model: ModuleModel) -> ModuleIndex:
    """What other modules need to know of this one: its reachable functions and its functions'
    calls to imported names, made where capture is possible."""
    bindings = _import_bindings(model.module, model.resolver.bindings, model.import_nodes)
    entries: list[IndexEntry] = []
    for fn in model.functions:
        edges: list[tuple[str, bool]] = []
        for call in fn.calls:
            if not (call.in_graph_region or call.context.may_capture):
                continue
            if fn.eager_break and not call.in_graph_region:
                continue  # an eager break's helpers run between the captured segments
            target = _imported(call.node.func, bindings)
            if target is not None:
                edges.append((target, call.in_graph_region))
        confidence = fn.confidence.value if fn.confidence is not None else ""
        if edges and (
            confidence == Confidence.HIGH.value or any(inside for _, inside in edges) or _on_a_hook_path(fn)
        ):
            entries.append((fn.qualname, confidence, _root_reason(fn), tuple(dict.fromkeys(edges))))
    return tuple(entries)


def _root_reason(fn: FunctionInfo) -> str:
    """Why reachability starts where `fn`'s chain of callers starts."""
    root, seen = fn, {id(fn)}
    while root.reachable_via is not None and id(root.reachable_via) not in seen:
        root = root.reachable_via
        seen.add(id(root))
    if root is fn:
        return fn.reachable_reason
    return f"called from {root.qualname} ({root.reachable_reason})"


def _on_a_hook_path(fn: FunctionInfo) -> bool:
    """Medium reach crosses modules only from offloading hooks (installed hooks and forwards,
    hook protocols): their helpers elsewhere are the offloading machinery the hook runs in every
    forward, where a model's forward calls helpers shared with paths no graph runner captures."""
    if fn.confidence is not Confidence.MEDIUM:
        return False
    reason = _root_reason(fn)
    return HOOK_REASON in reason or "installed as a" in reason


def _import_bindings(
    module: cst.Module, absolute: Mapping[str, str], imports: Iterable[cst.CSTNode] | None
) -> dict[str, str]:
    """Local name -> what it is bound to: `pkg.mod.f`, or `..mod.f` for a relative import."""
    bound = {name: target for name, target in absolute.items() if not target.startswith("torch")}
    nodes = imports if imports is not None else walk(module)
    for node in nodes:
        if not isinstance(node, cst.ImportFrom) or not node.relative or isinstance(node.names, cst.ImportStar):
            continue
        base = "." * len(node.relative) + (dotted_name(node.module) or "" if node.module is not None else "")
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            joined = f"{base}.{name}" if not base.endswith(".") else f"{base}{name}"
            bound[local] = joined
    return bound


def _imported(func: cst.BaseExpression, bindings: Mapping[str, str]) -> str | None:
    dotted = dotted_name(func)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    target = bindings.get(head)
    if target is None:
        return None
    return f"{target}.{rest}" if rest else target


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
    for key, (module, is_package, index) in indexes.items():
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
