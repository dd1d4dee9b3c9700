"""Layer 2: the tree's modules by dotted name. What a name denotes is then Python's scoping
(`lowered.py` places) and the heap's import objects (`calls.py`): `import a.b`, `from .m import f`,
aliases, star imports and `__init__.py` re-exports all resolve as the interpreter would."""

from __future__ import annotations

import os


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


def absolute_module(target: str, module: str, is_package: bool) -> str:
    """`..mod.f` written in `pkg.sub.this` is `pkg.mod.f` (a name with no leading dot is as
    written); a relative name past the top package keeps no package part."""
    if not target.startswith("."):
        return target
    level = len(target) - len(target.lstrip("."))
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        parts = parts[: max(0, len(parts) - (level - 1))]
    rest = target[level:]
    return ".".join([*parts, rest]) if rest else ".".join(parts)
