"""Where a device argument points: the host (`"cpu"`, `torch.device("cpu")`, an offloader's
`offload_device`, a constructor's CPU default)."""

from __future__ import annotations

import libcst as cst

from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import HOST_DEVICE_NAMES, self_attribute
from offlint.analysis.model import ModuleModel
from offlint.analysis.program import FunctionInfo


def names_host_device(model: ModuleModel, expr: cst.BaseExpression | None, fn: FunctionInfo) -> bool:
    """`"cpu"`, `torch.device("cpu")`, or `self.offload_device` where the constructor stores a
    CPU device there (directly, or from a parameter whose default is one: diffusers' and
    accelerate's offload hooks)."""
    if expr is None:
        return False
    if _cpu_literal(model, expr):
        return True
    dotted = dotted_name(expr) if isinstance(expr, cst.Name | cst.Attribute) else None
    if dotted is not None and dotted.rsplit(".", 1)[-1] in HOST_DEVICE_NAMES:
        return True  # the offloaders' own word for where weights rest: the host
    attr = self_attribute(expr)
    if attr is None or fn.cls is None:
        return False
    init = fn.cls.methods.get("__init__")
    if init is None:
        return False
    values = [a.value for a in init.assignments if any(self_attribute(t) == attr for t in a.targets)]
    if len(values) != 1 or values[0] is None:
        return False
    value = values[0]
    if isinstance(value, cst.Name):
        params = init.node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == value.value:
                return param.default is not None and _cpu_literal(model, param.default)
        return False
    return _cpu_literal(model, value)


def _cpu_literal(model: ModuleModel, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "cpu"
    if isinstance(expr, cst.Call) and expr.args and model.qualname(expr.func) == "torch.device":
        return _cpu_literal(model, expr.args[0].value)
    return False
