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
    # analysis turns files into findings: it never fixes, runs, prints or probes
    "analysis": ("offlint.fixing", "offlint.pipeline", "offlint.cli", "offlint.cli_fix", "offlint.probing", "torch"),
    # fixing knows the analysis model it rewrites from, never the run that drives it
    "fixing": ("offlint.pipeline", "offlint.cli", "offlint.cli_fix", "offlint.probing", "torch"),
    # probing runs code on a GPU: no analysis, no libcst
    "probing": ("offlint.analysis", "offlint.fixing", "offlint.pipeline", "libcst"),
    "reporting": ("offlint.analysis", "offlint.fixing", "offlint.pipeline", "offlint.probing", "libcst"),
    "pipeline": ("offlint.cli", "offlint.cli_fix", "offlint.probing"),
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
