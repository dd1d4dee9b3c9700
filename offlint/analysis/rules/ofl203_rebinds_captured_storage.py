"""OFL203 rebinds-captured-storage: rebinding the storage that capture-reachable copies read
(`self.host = new_pinned`, `param.data = new_pinned`); a captured graph keeps the old address."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from offlint.analysis.facts import called_function, is_none
from offlint.analysis.kinds import Kind, is_true, keyword, names_cuda_device, self_attribute
from offlint.analysis.model import ModuleModel
from offlint.analysis.module_moves import MoveTarget, module_moves
from offlint.analysis.program import Assignment, CallSite, ClassInfo, FunctionInfo
from offlint.analysis.reachability import finding_reach
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.syntax import same_code, walk
from offlint.analysis.torch_api import CAPTURE_TOKENS
from offlint.diagnostics import Confidence

_NOT_STORAGE = frozenset({Kind.STREAM, Kind.EVENT, Kind.GRAPH, Kind.NOT_TORCH})


class RebindsCapturedStorage(Rule):
    code = "OFL203"
    # the copies it pairs with must be capture-reachable
    tokens = CAPTURE_TOKENS

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        for move in module_moves(model):
            # `pre_forward(module): module.to(dtype=compute)`: the captured cast reads the
            # parameters this drops; replays read freed memory
            if move.method != "post_forward" and move.target is MoveTarget.DTYPE and move.site.hazardous:
                params = f"{code_of(move.site.receiver or move.site.node, model)}.parameters()"
                yield Finding(move.site.node, {"target": params, "copy": f"the captured cast of {params}"})
        copies = [
            site
            for site in model.all_calls()
            if site.hazardous and _copy_source(model, site) is not None
        ]
        if not copies:
            return
        setup_only = _setup_only_functions(model)
        reported: set[int] = set()
        # 1. same class: a capture-reachable copy reads self.A; another method rebinds it
        for cls in model.classes:
            sources: dict[str, CallSite] = {}
            for site in copies:
                if model.runs_on(site.function, cls):
                    attr = _source_attr(_copy_source(model, site))
                    if attr is not None and not _migrates_itself(site, attr):
                        sources.setdefault(attr, site)
            for attr, copy in sources.items():
                for assign in _rebindings(model, cls, attr, setup_only):
                    if id(assign.node) not in reported:
                        reported.add(id(assign.node))
                        yield Finding(assign.node, _details(model, assign, copy), confidence=_reach_of(model, copy))
        # 2. any function: `x.data = <new pinned host tensor>` in a module whose capture-reachable
        #    code copies host tensors to the device (the offloader's pinned sources)
        for fn in model.functions:
            if fn.qualname in setup_only or _is_lifecycle(fn):
                continue
            for assign in fn.assignments:
                if id(assign.node) in reported or assign.value is None:
                    continue
                if any(_is_data_target(t) for t in assign.targets) and _is_new_pinned(
                    model, fn, assign.value
                ):
                    confidence = max((_reach_of(model, c) for c in copies), key=lambda c: c.rank)
                    # the function re-points an offloaded weight: its other branches
                    # (`if same device: param.data = new`) rebind the same storage
                    for other in [assign, *_same_target_rebindings(fn, assign)]:
                        if id(other.node) not in reported:
                            reported.add(id(other.node))
                            yield Finding(other.node, _details(model, other, copies[0]), confidence=confidence)


def _same_target_rebindings(fn: FunctionInfo, assign: Assignment) -> list[Assignment]:
    return [
        other
        for other in fn.assignments
        if other is not assign
        and other.value is not None
        and not is_none(other.value)
        and any(same_code(t, u) for t in other.targets for u in assign.targets)
    ]


def _reach_of(model: ModuleModel, copy: CallSite) -> Confidence:
    """As sure as capture reaching the copies that read the storage (not the rebinding itself,
    which runs eagerly, between replays)."""
    return finding_reach(model, copy.node, True)[0]


def _details(model: ModuleModel, assign: Assignment, copy: CallSite) -> dict[str, str]:
    return {
        "target": code_of(assign.targets[0], model),
        "copy": code_of(copy.node, model),
    }


def _copy_source(model: ModuleModel, site: CallSite) -> cst.BaseExpression | None:
    """The tensor a host-to-device (or device-to-device) copy reads."""
    node = site.node
    if site.method == "copy_" and node.args:
        return node.args[0].value
    if site.method == "cuda" and site.receiver is not None:
        return site.receiver
    if site.method == "to" and site.receiver is not None:
        target = keyword(node, "device")
        if target is None and node.args and node.args[0].keyword is None:
            target = node.args[0].value
        if names_cuda_device(target, model.resolver):
            return site.receiver
    return None


def _source_attr(expr: cst.BaseExpression | None) -> str | None:
    """`A` for `self.A`, `self.A.data`, `self.A[i]`."""
    node = expr
    while node is not None:
        attr = self_attribute(node)
        if attr is not None:
            return attr
        if isinstance(node, cst.Subscript) or (
            isinstance(node, cst.Attribute) and node.attr.value == "data"
        ):
            node = node.value
        else:
            return None
    return None


def _rebindings(
    model: ModuleModel, cls: ClassInfo, attr: str, setup_only: set[str]
) -> Iterator[Assignment]:
    bindings: list[Assignment] = []
    for fn in model.functions:
        if not model.runs_on(fn, cls):
            continue
        for assign in fn.assignments:
            if assign.value is None or is_none(assign.value):
                continue
            if (
                any(_target_attr(t) == attr for t in assign.targets)
                and model.kind_of(assign.value, fn).kind not in _NOT_STORAGE
            ):
                bindings.append(assign)
    for assign in bindings:
        fn = assign.function
        if _is_lifecycle(fn) or fn.qualname in setup_only:
            continue
        if _refused_once_captured(model, fn, assign):
            continue
        through_data = any(_is_data_target(t) and _target_attr(t) == attr for t in assign.targets)
        bound_elsewhere = any(other.function is not fn for other in bindings)
        if through_data or bound_elsewhere:
            yield assign


def _refused_once_captured(model: ModuleModel, fn: FunctionInfo, assign: Assignment) -> bool:
    """The method leaves before the rebinding whenever the object holds a graph (`if self._graph
    is not None: raise`, flashinfer's direct-launch GDN path): no captured graph reads the old
    address, since none exists when it runs."""
    for stmt in fn.node.body.body:
        if any(node is assign.node for node in walk(stmt)):
            return False
        if isinstance(stmt, cst.If) and stmt.orelse is None and _leaves(stmt.body) and _holds_a_graph(model, fn, stmt.test):
            return True
    return False


def _leaves(block: cst.BaseSuite) -> bool:
    """The block ends the call: its last statement returns or raises."""
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else None
    smalls = last.body if isinstance(last, cst.SimpleStatementLine) else block.body if isinstance(block, cst.SimpleStatementSuite) else []
    return any(isinstance(small, cst.Return | cst.Raise) for small in smalls)


def _holds_a_graph(model: ModuleModel, fn: FunctionInfo, test: cst.BaseExpression) -> bool:
    """`self.graph is not None` or `self.graph` on a CUDA graph attribute."""
    subject = test
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comp = test.comparisons[0]
        if not (isinstance(comp.operator, cst.IsNot) and is_none(comp.comparator)):
            return False
        subject = test.left
    return self_attribute(subject) is not None and model.kind_of(subject, fn).kind is Kind.GRAPH


def _migrates_itself(site: CallSite, attr: str) -> bool:
    """`self.A = self.A.to(device)`: a lazy move of the tensor itself, not a copy the graph
    repeats from a fixed source."""
    statement = site.statement
    smalls = statement.body if isinstance(statement, cst.SimpleStatementLine) else [statement]
    return any(
        isinstance(small, cst.Assign) and any(_target_attr(t.target) == attr for t in small.targets)
        for small in smalls
    )


def _target_attr(target: cst.BaseExpression) -> str | None:
    """The attribute a store rebinds: `self.A = ...`, `self.A.data = ...`, `self.A[i].data = ...`.
    `self.A[i] = ...` writes into the tensor in place (or replaces a list element): not counted."""
    if isinstance(target, cst.Subscript):
        return None
    return _source_attr(target)


def _is_data_target(target: cst.BaseExpression) -> bool:
    return isinstance(target, cst.Attribute) and target.attr.value == "data"



def _is_new_pinned(model: ModuleModel, fn: FunctionInfo, value: cst.BaseExpression) -> bool:
    """A call that makes new pinned host memory (`x.pin_memory()`, `torch.empty(...,
    pin_memory=True)`); restoring an existing pinned tensor (`p.data = self.cpu[p]`) is not."""
    if not isinstance(value, cst.Call):
        return False
    return model.kind_of(value, fn).kind is Kind.PINNED_HOST or is_true(
        keyword(value, "pin_memory")
    )


def _is_lifecycle(fn: FunctionInfo) -> bool:
    name = fn.name
    return name.startswith("__") and name.endswith("__") and name != "__call__"


def _setup_only_functions(model: ModuleModel) -> set[str]:
    """Functions only ever called (in this module) from constructors or other setup-only
    functions: they run before any capture."""
    callers: dict[str, set[str]] = {}
    by_name: dict[str, FunctionInfo] = {}
    for fn in model.functions:
        by_name[fn.qualname] = fn
        for site in fn.calls:
            target = called_function(model, site)
            if target is not None:
                callers.setdefault(target.qualname, set()).add(fn.qualname)
    setup: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, who in callers.items():
            if name in setup or not who:
                continue
            if all(_is_lifecycle(by_name[c]) or c in setup for c in who if c in by_name):
                setup.add(name)
                changed = True
    return setup
