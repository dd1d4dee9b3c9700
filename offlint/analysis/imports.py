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


# what a torch device module (`torch.cuda`, or the accelerator's module however it is reached)
# resolves to: the accelerator-generic spellings stand for the CUDA API the rules know
DEVICE_MODULE = "torch.cuda"
# `getattr(torch, "cuda")`: literal names of the device modules folded into DEVICE_MODULE
_DEVICE_MODULE_NAMES = frozenset({"cuda"})


class NameResolver(cst.CSTVisitor):
    """Maps local names bound by imports to the qualified names they stand for, and names bound
    to a torch device module (`device_module = torch.get_device_module(dev)`,
    `self.mod = getattr(torch, device_type)`, see `device_module_of`) to `torch.cuda`."""

    def __init__(self) -> None:
        self.bindings: dict[str, str] = {}
        self.relative: dict[str, str] = {}  # `from .x import f` -> {"f": ".x.f"}
        # dotted names ("dm", "self.device_module") that hold a device module (ModuleModel
        # fills it: every binding of the name in the module must be one, flow-insensitively)
        self.device_modules: set[str] = set()
        # project callables whose result is used as an accelerator module (`get_accelerator`,
        # `TorchDeviceBackend`): their calls resolve like `torch.get_device_module(...)`
        self.accelerator_factories: set[str] = set()

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
        if isinstance(node.names, cst.ImportStar):
            return False
        base = _module_name(node.module) if node.module is not None else ""
        if base is None:
            return False
        # relative imports (`from ..x import f` -> `..x.f`) are kept apart: only the project call
        # graph resolves them, knowing which package the module sits in
        into = self.relative if node.relative else self.bindings
        prefix = "." * len(node.relative) + base
        if node.module is None and not node.relative:
            return False
        for alias in node.names:
            name = _module_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            into[local] = f"{prefix}.{name}" if base else f"{prefix}{name}"
        return False

    def qualname(self, expr: cst.BaseExpression) -> str | None:
        """Canonical qualified name of an imported name or attribute chain, else None.
        Chains through a device module resolve as `torch.cuda` ones: `torch.get_device_module(d)
        .Stream`, `getattr(torch, kind).Event`, `self.device_module.stream` (when bound so)."""
        dotted = dotted_name(expr)
        if dotted is None:
            return self._through_device_module_call(expr)
        head, _, rest = dotted.partition(".")
        bound = self.bindings.get(head)
        if bound is None:
            if self.device_modules:
                return self._through_device_module_name(dotted)
            return None
        return canonical(f"{bound}.{rest}" if rest else bound)

    def _through_device_module_name(self, dotted: str) -> str | None:
        parts = dotted.split(".")
        for size in (1, 2):  # `dm.Stream`, `self.device_module.Stream`
            if len(parts) >= size and ".".join(parts[:size]) in self.device_modules:
                rest = parts[size:]
                return canonical(".".join([DEVICE_MODULE, *rest])) if rest else DEVICE_MODULE
        return None

    def _through_device_module_call(self, expr: cst.BaseExpression) -> str | None:
        rest: list[str] = []
        node = expr
        while isinstance(node, cst.Attribute):
            rest.append(node.attr.value)
            node = node.value
        if not rest or not isinstance(node, cst.Call) or self.device_module_call(node) is None:
            return None
        return canonical(".".join([DEVICE_MODULE, *reversed(rest)]))

    def device_module_call(self, call: cst.Call) -> str | None:
        """`torch.get_device_module(...)`, `getattr(torch, name)` with a non-literal name (the
        accelerator's module: `getattr(torch, device.type)`) or the literal "cuda"."""
        func = call.func
        if isinstance(func, cst.Name) and func.value == "getattr":
            if len(call.args) != 2 or self.qualname(call.args[0].value) != "torch":
                return None  # a third argument is a default: dtype look-ups (`getattr(torch, n, None)`)
            name = call.args[1].value
            if isinstance(name, cst.SimpleString):
                return DEVICE_MODULE if name.evaluated_value in _DEVICE_MODULE_NAMES else None
            if isinstance(name, cst.ConcatenatedString | cst.FormattedString):
                return None
            return DEVICE_MODULE
        if isinstance(func, cst.Attribute) and func.attr.value == "get_device_module":
            return DEVICE_MODULE if self.qualname(func) == "torch.get_device_module" else None
        if self.accelerator_factories and dotted_name(func) in self.accelerator_factories:
            return DEVICE_MODULE
        return None

    def device_module_of(self, expr: cst.BaseExpression) -> str | None:
        """`torch.cuda` when `expr` evaluates to a torch device module: `torch.cuda` itself, a
        device-module call (`device_module_call`), a name already bound to one, or a conditional
        whose branches all are (`getattr(torch, kind) if has_accel else torch.cuda`)."""
        if isinstance(expr, cst.Call):
            return self.device_module_call(expr)
        if isinstance(expr, cst.IfExp):
            body, orelse = self.device_module_of(expr.body), self.device_module_of(expr.orelse)
            return body if body is not None and body == orelse else None
        if isinstance(expr, cst.Name | cst.Attribute):
            return DEVICE_MODULE if self.qualname(expr) == DEVICE_MODULE else None
        return None

    def imports_torch(self) -> bool:
        return any(q == "torch" or q.startswith("torch.") for q in self.bindings.values())
