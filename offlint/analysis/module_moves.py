"""Whole-module moves and casts in model hooks: `module.to(dtype=...)`, `module.to(device)`,
`module.cpu()` where `module` is the module a hook method receives (accelerate's and diffusers'
`ModelHook` protocol: `init_hook(module)`, `pre_forward(module, ...)`, `post_forward(module, out)`).

Such a call re-points every parameter of the module at new storage. Inside a captured forward the
captured kernels keep the addresses they were captured with, so the rules care where each move
runs: before the module's own forward (the storage it drops is what replays read: OFL203), after
it (the module leaves the capture holding tensors only a replay writes: OFL201), and whether the
class parks the module in pageable host memory between forwards (a device move copies from there:
OFL106).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import libcst as cst

from offlint.analysis.kinds import keyword, names_cuda_device
from offlint.analysis.model import ModuleModel
from offlint.analysis.placement import names_host_device
from offlint.analysis.program import CallSite, ClassInfo
from offlint.analysis.reachability import is_hook_class
from offlint.analysis.syntax import parameter_names


class MoveTarget(enum.Enum):
    DTYPE = "dtype"
    DEVICE = "device"
    HOST = "host"


@dataclass(frozen=True)
class ModuleMove:
    site: CallSite
    method: str  # the hook method it runs in: "pre_forward", "post_forward", "init_hook", ...
    target: MoveTarget
    owner: ClassInfo | None = None  # the hook class whose instance runs it (it may inherit it)


_CASTS = frozenset({"half", "float", "bfloat16", "double"})


def module_moves(model: ModuleModel) -> list[ModuleMove]:
    by_name = {cls.name: cls for cls in model.classes}
    found: list[ModuleMove] = []
    seen: set[int] = set()
    for cls in model.classes:
        if not is_hook_class(cls, by_name):
            continue
        # its own methods and those it inherits from same-module bases (first definition wins)
        methods = {name: m for holder in reversed(model.ancestry(cls)) for name, m in holder.methods.items()}
        for fn in methods.values():
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            params = parameter_names(fn.node.params)
            if len(params) < 2 or params[0] != "self":
                continue
            module = params[1]
            for site in fn.calls:
                receiver = site.receiver
                if not (isinstance(receiver, cst.Name) and receiver.value == module):
                    continue
                target = _target_of(model, site)
                if target is not None:
                    found.append(ModuleMove(site, fn.name, target, cls))
    return found


def _target_of(model: ModuleModel, site: CallSite) -> MoveTarget | None:
    method, node = site.method, site.node
    if method in _CASTS:
        return MoveTarget.DTYPE
    if method == "cuda":
        return MoveTarget.DEVICE
    if method == "cpu":
        return MoveTarget.HOST
    if method != "to":
        return None
    if keyword(node, "dtype") is not None:
        return MoveTarget.DTYPE
    where = keyword(node, "device")
    if where is None and node.args and node.args[0].keyword is None:
        where = node.args[0].value
    if where is None:
        return None
    if names_host_device(model, where, site.function):
        return MoveTarget.HOST
    if names_cuda_device(where, model.resolver):
        return MoveTarget.DEVICE
    return None


def parks_on_host(model: ModuleModel, move: ModuleMove) -> ModuleMove | None:
    """Another method of the same hook class moves the module to the host (`init_hook`,
    `offload`): between forwards its parameters sit in pageable memory."""
    for other in module_moves(model):
        if other.target is MoveTarget.HOST and other.owner is move.owner and other.method != move.method:
            return other
    return None
