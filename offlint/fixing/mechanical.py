"""The small, local fixes.

OFL204: `t.record_stream(torch.cuda.current_stream())` inside `with torch.cuda.stream(side):`
records `side` itself (a no-op). The fix takes the consumer stream before entering the block and
records that one. Safe: it only delays the reuse of `t`'s memory to where it was meant to be.

OFL106: a host->device copy whose host tensor comes from one visible CPU allocation
(`torch.empty(...)` and friends), followed through locals, `self` attributes and the containers
they are stored into. The fix allocates it pinned (`pin_memory=True`). Unsafe, as the rule file
says: same values, but page-locked memory is scarce, and only an allocation kept alive for the
graph's lifetime may be pinned (a per-call temporary is never touched).
"""

from __future__ import annotations

import libcst as cst

from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import CallSite, FunctionInfo, ModuleModel
from offlint.analysis.reachability import finding_reach
from offlint.analysis.streams import current_stream_scope
from offlint.analysis.syntax import walk
from offlint.analysis.torch_api import CURRENT_STREAM
from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE, Confidence
from offlint.fixing.edits import Owner, StatementPlan, statements
from offlint.fixing.findings import Found, at_call_sites
from offlint.fixing.shape import contains, top_level_statements

PINNABLE_FACTORIES = frozenset(
    {
        "torch.empty",
        "torch.zeros",
        "torch.ones",
        "torch.full",
        "torch.empty_strided",
        "torch.rand",
        "torch.randn",
        "torch.randint",
        "torch.arange",
        "torch.tensor",
        "torch.empty_like",
        "torch.zeros_like",
        "torch.ones_like",
        "torch.full_like",
        "torch.rand_like",
        "torch.randn_like",
    }
)
_LIKE = "_like"


# ----------------------------------------------------------------------------- OFL204


def plan_record_stream_fix(model: ModuleModel, floor: Confidence = DEFAULT_MIN_CONFIDENCE) -> StatementPlan:
    """For each OFL204 finding (and no other `record_stream`): its own argument, the current
    stream taken inside the side-stream block, becomes the consumer stream taken just before the
    block. A `record_stream` the rule leaves alone in the same block (a tensor handed in, used on
    the side stream: recording the side stream is right there) keeps its argument."""
    plan = StatementPlan()
    by_scope: dict[cst.With, list[tuple[Found, CallSite]]] = {}
    for found, site in at_call_sites(model, ("OFL204",), floor):
        arg = site.node.args[0].value if len(site.node.args) == 1 else None
        # the finding's fact: the block inside which its stream was taken as the current stream
        scope = (
            current_stream_scope(model, site.function, arg, site.order, site.stream_scopes)
            if arg is not None
            else None
        )
        if scope is None or not isinstance(scope.node, cst.With):
            plan.not_fixed.append(
                (found.code, found.node, "the stream is switched by a call, not a `with` block: no block to take the consumer stream before")
            )
            continue
        if not (isinstance(arg, cst.Call) and model.qualname(arg.func) in CURRENT_STREAM) or not any(
            s is scope for s in site.stream_scopes
        ):
            plan.not_fixed.append(
                (
                    found.code,
                    found.node,
                    "the current stream is taken into a name (or by a caller) before this call: take it before "
                    "`with torch.cuda.stream(...)` by hand and record that",
                )
            )
            continue
        by_scope.setdefault(scope.node, []).append((found, site))
    for with_stmt, sites in by_scope.items():
        fn = sites[0][1].function
        name = _fresh_name(fn, "consumer_stream")
        current = model.module.code_for_node(sites[0][1].node.args[0].value)
        args = {id(site.node.args[0].value) for _, site in sites}

        changed = with_stmt.visit(_UseConsumerStream(args, name))
        assert isinstance(changed, cst.With)
        hoisted = statements(
            "# Taken before entering the side-stream block: inside it, current_stream() is the side\n"
            "# stream itself, and recording a tensor on its allocating stream does nothing.\n"
            f"{name} = {current}\n"
        )
        with plan.owning([Owner(found.code, found.node) for found, _ in sites]):
            plan.insert_before(
                with_stmt, hoisted, ("OFL204",), "take the consumer stream before the side-stream block"
            )
            plan.replace(with_stmt, changed, ("OFL204",), "record the tensor on the consumer stream")
    return plan


class _UseConsumerStream(cst.CSTTransformer):
    """Replaces the given `record_stream` arguments by the hoisted consumer stream's name."""

    def __init__(self, args: set[int], name: str) -> None:
        super().__init__()
        self.args = args
        self.name = name

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        if id(original_node.value) in self.args:
            return updated_node.with_changes(value=cst.Name(self.name))
        return updated_node


def _fresh_name(fn: FunctionInfo, wanted: str) -> str:
    taken = {n.value for n in walk(fn.node) if isinstance(n, cst.Name)}
    name = wanted
    counter = 1
    while name in taken:
        counter += 1
        name = f"{wanted}_{counter}"
    return name


# ----------------------------------------------------------------------------- OFL106


def plan_pin_memory_fix(model: ModuleModel, floor: Confidence = DEFAULT_MIN_CONFIDENCE) -> StatementPlan:
    """Pin the visible host allocation of each copy OFL106 reports at `floor` or above (what
    `check` shows is what `fix` changes)."""
    from offlint.analysis.rules.ofl106_pageable_host_copy import PageableHostCopy

    reported = {
        id(finding.node): finding.node
        for finding in PageableHostCopy().find(model)
        if finding_reach(model, finding.node, True)[0].at_least(floor)
    }
    plan = StatementPlan()
    allocations: dict[int, tuple[cst.SimpleStatementLine, cst.Call, list[Owner]]] = {}
    for site in model.all_calls():
        if id(site.node) not in reported:
            continue  # the fix acts on the findings `check` reports, no others
        owner = Owner("OFL106", reported[id(site.node)])
        source = _host_side_of_copy(model, site)
        found = _visible_allocation(model, site, source) if source is not None else None
        if found is None:
            plan.not_fixed.append(
                (
                    owner.code,
                    owner.node,
                    "no single host allocation of the copied tensor is in view here: allocate it with "
                    "`pin_memory=True` where it is made (and keep it alive for the graph's lifetime)",
                )
            )
            continue
        line, call = found
        allocations.setdefault(id(call), (line, call, []))[2].append(owner)
    for line, call, owners in allocations.values():
        changed = line.visit(_AddPinMemory(call))
        assert isinstance(changed, cst.BaseStatement)
        with plan.owning(owners):
            plan.replace(line, changed, ("OFL106",), "allocate the host tensor pinned")
    return plan


class _AddPinMemory(cst.CSTTransformer):
    """Adds `pin_memory=True` to one factory call, in the call's own layout."""

    def __init__(self, call: cst.Call) -> None:
        super().__init__()
        self.call = call

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if original_node is not self.call:
            return updated_node
        args = list(updated_node.args)
        pin = cst.Arg(
            value=cst.Name("True"),
            keyword=cst.Name("pin_memory"),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""),
                whitespace_after=cst.SimpleWhitespace(""),
            ),
        )
        if args and isinstance(args[-1].comma, cst.Comma):
            # a trailing comma: the new argument takes it (and the layout before `)`), the
            # old last one takes the separator its neighbours use
            separator = (
                args[-2].comma
                if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma)
                else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            pin = pin.with_changes(comma=args[-1].comma)
            args[-1] = args[-1].with_changes(comma=separator)
        elif args:
            args[-1] = args[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
        args.append(pin)
        return updated_node.with_changes(args=args)


def _host_side_of_copy(model: ModuleModel, site: CallSite) -> cst.BaseExpression | None:
    """The host tensor of `src.to(dev, ...)`, `src.cuda(...)`, `dst.copy_(src, ...)` when the
    copy is asynchronous or may run under capture."""
    non_blocking = any(
        a.keyword is not None
        and a.keyword.value == "non_blocking"
        and isinstance(a.value, cst.Name)
        and a.value.value == "True"
        for a in site.node.args
    )
    if not (non_blocking or site.hazardous):
        return None
    if site.method == "to" and site.receiver is not None and site.node.args:
        target = site.node.args[0].value
        if isinstance(target, cst.SimpleString) and "cpu" in target.value:
            return None
        return site.receiver
    if site.method == "cuda" and site.receiver is not None:
        return site.receiver
    if site.method == "copy_" and site.node.args:
        return site.node.args[0].value
    return None


def _visible_allocation(
    model: ModuleModel, site: CallSite, source: cst.BaseExpression
) -> tuple[cst.SimpleStatementLine, cst.Call] | None:
    """The line and the CPU factory call that allocates `source`, followed through the bindings
    the analysis sees (a local, `self.X`, an element stored into `self.X[k]` or appended to it,
    from whichever method stores it), when exactly one factory call is found."""
    found: dict[int, tuple[FunctionInfo, cst.Call]] = {}
    if not _allocations(model, site.function, source, site.order, found, 0) or len(found) != 1:
        return None
    fn, call = next(iter(found.values()))
    line = next((s for s in _simple_lines(fn) if contains(s, call)), None)
    return (line, call) if line is not None else None


def _allocations(
    model: ModuleModel,
    fn: FunctionInfo,
    expr: cst.BaseExpression,
    before: int | None,
    found: dict[int, tuple[FunctionInfo, cst.Call]],
    depth: int,
) -> bool:
    """Collect into `found` the CPU factory calls whose results `expr` (in `fn`) may hold; False
    when some value stored there is anything else (then there is nothing safe to pin)."""
    if depth > 4:
        return False
    if isinstance(expr, cst.Call):
        if not _cpu_factory(model, expr):
            return False
        found[id(expr)] = (fn, expr)
        return True
    while isinstance(expr, cst.Subscript):
        expr = expr.value  # an element: what was stored into the container
    stores = _stores(model, fn, expr, before)
    if not stores:
        return False
    return all(_allocations(model, owner, value, None, found, depth + 1) for owner, value in stores)


def _stores(
    model: ModuleModel, fn: FunctionInfo, target: cst.BaseExpression, before: int | None
) -> list[tuple[FunctionInfo, cst.BaseExpression]]:
    """Values assigned to `target` (a local of `fn`, or `self.X` in any method of its class), to
    its elements, or appended to it; empty container literals (`self.host = {}`) left out."""
    attr = self_attribute(target)
    if attr is not None:
        if fn.cls is None:
            return []
        scopes = list(fn.cls.methods.values())

        def matches(t: cst.BaseExpression) -> bool:
            return self_attribute(t) == attr
    elif isinstance(target, cst.Name):
        scopes = [fn]
        name = target.value

        def matches(t: cst.BaseExpression) -> bool:
            return isinstance(t, cst.Name) and t.value == name
    else:
        return []
    stores: list[tuple[FunctionInfo, cst.BaseExpression]] = []
    for scope in scopes:
        for assign in scope.assignments:
            if assign.value is None or (scope is fn and before is not None and assign.order >= before):
                continue
            for t in assign.targets:
                base = t
                while isinstance(base, cst.Subscript):
                    base = base.value
                if matches(base) and not _empty_container(assign.value):
                    stores.append((scope, assign.value))
        for call in scope.calls:
            if (
                call.method in ("append", "insert", "add")
                and call.receiver is not None
                and call.node.args
                and matches(call.receiver)
            ):
                stores.append((scope, call.node.args[-1].value))
    return stores


def _empty_container(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Dict | cst.List | cst.Tuple | cst.Set):
        return not value.elements
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("dict", "list") and not value.args


def _simple_lines(fn: FunctionInfo) -> list[cst.SimpleStatementLine]:
    out = []
    stack: list[cst.CSTNode] = list(top_level_statements(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            out.append(node)
            continue
        if isinstance(node, cst.FunctionDef | cst.ClassDef):
            continue
        stack.extend(node.children)
    return out


def _cpu_factory(model: ModuleModel, call: cst.Call) -> bool:
    name = model.qualname(call.func)
    if name not in PINNABLE_FACTORIES:
        return False
    device = None
    for arg in call.args:
        if arg.keyword is None:
            continue
        if arg.keyword.value == "pin_memory":
            return False  # the author decided (maybe through a flag): leave it
        if arg.keyword.value == "device":
            device = arg.value
    if device is None:
        return not name.endswith(_LIKE)  # *_like follows its input's device
    if isinstance(device, cst.SimpleString):
        return device.value.strip("\"'") == "cpu"
    if (
        isinstance(device, cst.Call)
        and model.qualname(device.func) == "torch.device"
        and device.args
    ):
        first = device.args[0].value
        return isinstance(first, cst.SimpleString) and first.value.strip("\"'") == "cpu"
    return False


__all__ = ["contains", "plan_pin_memory_fix", "plan_record_stream_fix"]
