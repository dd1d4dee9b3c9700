"""Resolve names and attribute chains to qualified names through every import style.

Deliberately flow-insensitive and cheap (no libcst scope provider, which costs ~9× a parse):
imports anywhere in the module bind their local names for the whole module, which is what
offloader code does in practice.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from offlint.analysis.syntax import walk
from offlint.analysis.torch_api import canonical


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    node: cst.BaseExpression = expr
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _module_name(expr: cst.BaseExpression) -> str | None:
    return dotted_name(expr)


class NameResolver(cst.CSTVisitor):
    """Maps local names bound by imports to the qualified names they stand for."""

    def __init__(self) -> None:
        self.bindings: dict[str, str] = {}

    @classmethod
    def of(cls, module: cst.Module, imports: Sequence[cst.Import | cst.ImportFrom] | None = None) -> NameResolver:
        """From every import in `module` (or the given import statements, in source order)."""
        resolver = cls()
        for node in walk(module) if imports is None else imports:
            if isinstance(node, cst.Import):
                resolver.visit_Import(node)
            elif isinstance(node, cst.ImportFrom):
                resolver.visit_ImportFrom(node)
        return resolver

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = _module_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.bindings[alias.asname.name.value] = full
            else:
                head = full.split(".")[0]
                self.bindings[head] = head
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return False
        base = _module_name(node.module)
        if base is None:
            return False
        for alias in node.names:
            name = _module_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.bindings[local] = f"{base}.{name}"
        return False

    def qualname(self, expr: cst.BaseExpression) -> str | None:
        """Canonical qualified name of an imported name or attribute chain, else None."""
        dotted = dotted_name(expr)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        bound = self.bindings.get(head)
        if bound is None:
            return None
        return canonical(f"{bound}.{rest}" if rest else bound)

    def imports_torch(self) -> bool:
        return any(q == "torch" or q.startswith("torch.") for q in self.bindings.values())
