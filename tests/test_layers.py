"""The layers import downwards only (DESIGN: cli → pipeline → analysis | fixing | probing →
diagnostics/report). Read from the sources, every import counted, those inside functions too:
a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "offlint"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _modules_of(layer: str) -> list[Path]:
    folder = PACKAGE / layer
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [PACKAGE / f"{layer}.py"]


def _reaches(name: str, target: str) -> bool:
    return name == target or name.startswith(target + ".")


FORBIDDEN = {
    # the semantic core computes facts from Python's rules: no libcst, no rules, no run
    "semantics": ("offlint.analysis", "offlint.fixing", "offlint.pipeline", "offlint.cli", "offlint.probing", "offlint.reporting", "libcst", "torch"),
    # analysis turns files into findings: it never fixes, runs, prints or probes
    "analysis": ("offlint.fixing", "offlint.pipeline", "offlint.cli", "offlint.cli_fix", "offlint.probing", "offlint.server", "torch"),
    # fixing knows the analysis model it rewrites from, never the run that drives it
    "fixing": ("offlint.pipeline", "offlint.cli", "offlint.cli_fix", "offlint.probing", "torch"),
    # probing runs code on a GPU: no analysis, no libcst
    "probing": ("offlint.analysis", "offlint.fixing", "offlint.pipeline", "libcst"),
    "reporting": ("offlint.analysis", "offlint.fixing", "offlint.pipeline", "offlint.probing", "libcst"),
    "pipeline": ("offlint.cli", "offlint.cli_fix", "offlint.probing", "offlint.server"),
    # the language server goes through the pipeline, as the command line does: no analysis of
    # its own (pipeline/editor.py), no fixer called around it
    "server": (
        "offlint.analysis", "offlint.fixing", "offlint.probing", "offlint.cli", "offlint.cli_fix", "libcst", "torch",
    ),
    # the command line goes through the pipeline
    "cli": ("offlint.analysis", "offlint.fixing"),
    "cli_fix": ("offlint.analysis", "offlint.fixing"),
    "diagnostics": ("offlint.analysis", "offlint.fixing", "offlint.pipeline", "offlint.probing", "libcst"),
}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_only_downwards(layer: str) -> None:
    modules = _modules_of(layer)
    assert modules and all(m.is_file() for m in modules), layer
    wrong = [
        f"{module.relative_to(PACKAGE.parent)} imports {name}"
        for module in modules
        for name in sorted(_imports(module))
        if any(_reaches(name, target) for target in FORBIDDEN[layer])
    ]
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_lazy_imports() -> None:
    # the pipeline's own lazy import of the fixers is what hands them to the engine
    assert "offlint.fixing.availability" in _imports(PACKAGE / "pipeline" / "check.py")
    assert "offlint.analysis.engine" in _imports(PACKAGE / "fixing" / "apply.py")


def _module_graph() -> dict[str, set[str]]:
    """offlint's modules and the offlint modules each imports (relative imports resolved, those
    under `if TYPE_CHECKING:` and inside functions counted)."""
    names: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        wanted: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                wanted.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                wanted.add(base)
                wanted.update(f"{base}.{alias.name}" for alias in node.names)
        targets = set()
        for target in wanted:
            while target and target not in names:
                target = target.rpartition(".")[0]
            if target and target != name and target != "offlint":
                targets.add(target)
        graph[name] = targets
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle() -> None:
    graph = _module_graph()
    assert "offlint.analysis.model" in graph["offlint.analysis.build"]
    assert not _circles(graph), _circles(graph)


def test_the_circle_finder_finds_one() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
