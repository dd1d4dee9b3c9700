"""OFL106 pageable-host-copy: a host<->device copy whose host side is known to be pageable."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from offlint.analysis.facts import made_on_cache_miss
from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import Kind, is_true, keyword, names_cpu_device, names_cuda_device
from offlint.analysis.model import ModuleModel
from offlint.analysis.module_moves import MoveTarget, module_moves, parks_on_host
from offlint.analysis.parameter_parking import pageable_park, parameter_storage
from offlint.analysis.program import CallSite
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.syntax import same_code
from offlint.diagnostics import Confidence

# `torch.tensor(data, device="cuda")`: the data is staged in pageable host memory first
_CONSTRUCT_ON_DEVICE = frozenset({"torch.tensor", "torch.as_tensor"})
_LITERALS = (cst.List, cst.Tuple, cst.ListComp, cst.Integer, cst.Float, cst.UnaryOperation)
# loading a checkpoint straight onto the device: the file is read into pageable host memory and
# copied from there (diffusers' disk offload onloads a group this way in the hook's pre_forward);
# the keyword that names the device
_LOAD_TO_DEVICE = {
    "safetensors.torch.load_file": "device",
    "safetensors.safe_open": "device",
    "torch.load": "map_location",
}


class PageableHostCopy(Rule):
    code = "OFL106"
    explains_reachability = True
    tokens = (".to(", ".cuda(", "copy_(", "tensor(", "load_file(", "safe_open(", "load(")

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        moved: set[int] = set()
        for move in module_moves(model):
            # `init_hook(module): module.to("cpu")` ... `pre_forward(module): module.to(device)`:
            # the hook parks the module's parameters in pageable memory and copies them back
            if move.target is MoveTarget.DEVICE and move.method != "post_forward" and move.site.hazardous:
                parked = parks_on_host(model, move)
                if parked is not None:
                    moved.add(id(move.site.node))
                    params = f"{code_of(parked.site.receiver or move.site.node, model)}.parameters()"
                    copy = f".{move.site.method}() (`{parked.method}` parks the module on the host)"
                    yield Finding(move.site.node, {"host": params, "copy": copy})
        for site in model.all_calls():
            if id(site.node) in moved:
                continue
            non_blocking = is_true(keyword(site.node, "non_blocking"))
            if not (site.hazardous or non_blocking):
                continue
            found = self._copy_of(model, site, non_blocking)
            if found is not None:
                host, copy = found
                # made on a cache miss: at the warm-up's first call per shape, not in the capture
                memo = Confidence.LOW if made_on_cache_miss(site) else None
                yield Finding(site.node, {"host": code_of(host, model), "copy": copy}, confidence=memo)

    def _copy_of(
        self, model: ModuleModel, site: CallSite, non_blocking: bool
    ) -> tuple[cst.BaseExpression, str] | None:
        node, fn = site.node, site.function

        def kind(expr: cst.BaseExpression) -> Kind:
            typed = model.kind_of(expr, fn)
            return typed.kind if not typed.guessed else Kind.UNKNOWN

        if site.method in ("to", "cuda") and site.receiver is not None:
            if site.method == "to":
                target = keyword(node, "device")
                if target is None and node.args and node.args[0].keyword is None:
                    target = node.args[0].value
                if not names_cuda_device(target, model.resolver) or names_cpu_device(target):
                    return None
            if kind(site.receiver) is Kind.PAGEABLE_HOST:
                return site.receiver, f".{site.method}()"
            if kind(site.receiver) is Kind.HOST_TENSOR and site.hazardous:
                # pinned on some paths only (`pin_memory=should_pin()`): under capture the
                # pageable path fails
                return site.receiver, f".{site.method}() (host memory pinned only on some paths)"
            parked = pageable_park(model, fn.cls) if fn.cls is not None else None
            if parked is not None and parked is not fn and parameter_storage(model, fn, site.receiver):
                # `param.data.to(self.onload_device)` where `offload_` did `param.data = ....to("cpu")`
                return site.receiver, f".{site.method}() (`{parked.name}` parks the parameters in pageable host memory)"
            return None
        if (
            site.method == "copy_"
            and site.receiver is not None
            and node.args
            and node.args[0].keyword is None
        ):
            dst, src = site.receiver, node.args[0].value
            dst_kind, src_kind = kind(dst), kind(src)
            if dst_kind is Kind.DEVICE_TENSOR and src_kind is Kind.PAGEABLE_HOST:
                return src, "copy_() host to device"
            if dst_kind is Kind.DEVICE_TENSOR and src_kind is Kind.HOST_TENSOR and site.hazardous:
                return src, "copy_() host to device (host memory pinned only on some paths)"
            if dst_kind is Kind.PAGEABLE_HOST and src_kind is Kind.DEVICE_TENSOR:
                return dst, "copy_() device to host"
            return None
        if site.callee in _LOAD_TO_DEVICE and site.hazardous and node.args:
            if not names_cuda_device(keyword(node, _LOAD_TO_DEVICE[site.callee]), model.resolver):
                return None
            return node.args[0].value, f"{site.callee}(..., {_LOAD_TO_DEVICE[site.callee]}=<cuda>) of the file"
        if site.callee in _CONSTRUCT_ON_DEVICE and site.hazardous and node.args:
            if not names_cuda_device(keyword(node, "device"), model.resolver):
                return None
            data = node.args[0].value
            if kind(data) is Kind.PAGEABLE_HOST and _not_a_tensor_here(site, data):
                return None  # the `else` of `isinstance(value, torch.Tensor)`: dead for a tensor
            if isinstance(data, _LITERALS) or kind(data) is Kind.PAGEABLE_HOST or _python_arithmetic(data, kind):
                return data, f"{site.callee}(..., device=...)"
            if isinstance(data, cst.Call) and (model.qualname(data.func) or "").startswith(
                "numpy."
            ):
                return data, f"{site.callee}(..., device=...)"
        return None


def _not_a_tensor_here(site: CallSite, value: cst.BaseExpression) -> bool:
    """The site runs only where `isinstance(value, torch.Tensor)` failed."""
    for test, taken in site.guards:
        if (
            not taken
            and isinstance(test, cst.Call)
            and isinstance(test.func, cst.Name)
            and test.func.value == "isinstance"
            and len(test.args) == 2
            and same_code(test.args[0].value, value)
            and (dotted_name(test.args[1].value) or "").endswith("Tensor")
        ):
            return True
    return False


def _python_arithmetic(expr: cst.BaseExpression, kind: Callable[[cst.BaseExpression], Kind]) -> bool:
    """`bsz * seqlen`, `n + 1`: arithmetic on values none of which is a torch tensor (shape
    sizes, counts) - a Python number, staged in pageable memory by `torch.tensor(..., device=)`."""
    if not isinstance(expr, cst.BinaryOperation):
        return False
    leaves: list[cst.BaseExpression] = []
    stack: list[cst.BaseExpression] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BinaryOperation):
            stack += [node.left, node.right]
        else:
            leaves.append(node)
    return all(
        isinstance(leaf, cst.Integer | cst.Float)
        or (isinstance(leaf, cst.Name | cst.Attribute) and not kind(leaf).is_tensor)
        for leaf in leaves
    )
