"""OFL105 host-sync-in-capture: host/device synchronisation in code that may be captured."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from offlint.analysis.facts import made_on_cache_miss, receiver_kind
from offlint.analysis.kinds import Kind, is_true, keyword, self_attribute
from offlint.analysis.model import ModuleModel
from offlint.analysis.placement import names_host_device
from offlint.analysis.program import CallSite, FunctionInfo
from offlint.analysis.rule import Finding, Rule, code_of
from offlint.analysis.syntax import parameter_names, walk
from offlint.analysis.torch_api import DEVICE_SYNCS, STREAM_SYNC_METHODS
from offlint.diagnostics import Confidence

# tensor methods that copy to the host and block on the device
_TENSOR_SYNCS = frozenset({"item", "tolist", "cpu"})
# kinds on which those methods never touch the device
_HOST_SIDE = frozenset({Kind.PINNED_HOST, Kind.PAGEABLE_HOST, Kind.HOST_TENSOR, Kind.NOT_TORCH})
_DEVICE_ONLY = frozenset({Kind.DEVICE_TENSOR})


class HostSyncInCapture(Rule):
    code = "OFL105"
    explains_reachability = True
    tokens = (
        "synchronize(",
        ".query(",
        ".item(",
        ".tolist(",
        ".cpu(",
        ".to(",
        ".numpy(",
        "nonzero(",
        "print(",
    )

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        cleanup: dict[int, set[int]] = {}
        for site in model.all_calls():
            if not site.hazardous or site.sync_allowed:
                continue  # a block the project's sync checker allows: its syncs are intended
            what = self._sync_of(model, site)
            if what is None:
                continue
            fn = site.function
            if id(fn) not in cleanup:
                cleanup[id(fn)] = _in_reraising_handlers(fn.node)
            if id(site.node) in cleanup[id(fn)]:
                # `except Exception: stream.synchronize(); raise` (LightX2V, SGLang's L2 transfer):
                # runs only while the call is failing, and a capture around it is lost to the
                # exception anyway; the sync changes which error is reported, not whether one is
                continue
            # made on a cache miss: at the warm-up's first call per shape, not in the capture
            yield Finding(site.node, {"call": what}, confidence=Confidence.LOW if made_on_cache_miss(site) else None)

    def _sync_of(self, model: ModuleModel, site: CallSite) -> str | None:
        node = site.node
        if site.callee in DEVICE_SYNCS:
            return "torch.cuda.synchronize()"
        if site.callee == "torch.nonzero" and keyword(node, "size") is None:
            if (
                node.args
                and model.kind_of(node.args[0].value, site.function).kind not in _HOST_SIDE
            ):
                return "torch.nonzero() without size="
            return None
        if site.method in STREAM_SYNC_METHODS:
            kind = receiver_kind(model, site).kind
            if kind is Kind.STREAM:
                return f"Stream.{site.method}()"
            return None  # events: OFL107 (captured-event-query) owns Event.query/synchronize
        if site.method in _TENSOR_SYNCS and site.receiver is not None and not node.args:
            typed = receiver_kind(model, site)
            if typed.kind in _HOST_SIDE or typed.kind in (Kind.STREAM, Kind.EVENT, Kind.GRAPH):
                return None
            if typed.kind is Kind.UNKNOWN and not _looks_like_tensor_expr(site.receiver):
                return None
            return f".{site.method}()"
        if site.method == "to" and site.receiver is not None and node.args and not is_true(keyword(node, "non_blocking")):
            # `.to("cpu", non_blocking=True)` copies into a pinned tensor it allocates and does
            # not wait for it: no host sync (its consumer must wait on an event instead)
            # `.to("cpu")`, `.to(self.offload_device)` of a device tensor: a copy into pageable host
            # memory the host waits for (PyTorch refuses it during capture)
            target = keyword(node, "device") or (node.args[0].value if node.args[0].keyword is None else None)
            if target is not None and names_host_device(model, target, site.function):
                kind = receiver_kind(model, site).kind
                if kind not in _HOST_SIDE and kind not in (Kind.STREAM, Kind.EVENT, Kind.GRAPH) and (
                    kind is not Kind.UNKNOWN or _looks_like_tensor_expr(site.receiver)
                ):
                    return f".to({code_of(target, model)})"
        if site.method == "numpy" and receiver_kind(model, site).kind in _DEVICE_ONLY:
            return ".numpy()"
        if (
            site.method == "nonzero"
            and keyword(node, "size") is None
            and receiver_kind(model, site).kind in _DEVICE_ONLY
        ):
            return ".nonzero() without size="
        if (
            isinstance(site.statement, cst.If | cst.While)
            and site.method in _REDUCTIONS
            and _truth_operand(site.statement.test, node)
            and _device_tensor_value(model, site)
        ):
            # `if x.abs().max() > 1e4:` - Python takes the truth of a CUDA tensor on the host
            keyword_ = "if" if isinstance(site.statement, cst.If) else "while"
            return f"{keyword_} {code_of(node, model)}"
        if isinstance(node.func, cst.Name) and node.func.value in ("print", "repr", "bool", "str"):
            for arg in node.args:
                if model.kind_of(arg.value, site.function).kind in _DEVICE_ONLY or (
                    node.func.value == "bool" and _tensor_truth(model, arg.value, site)
                ):
                    return (
                        f"{node.func.value}() of a CUDA tensor ({code_of(arg.value, model)})"
                    )
        return None


def _tensor_truth(model: ModuleModel, expr: cst.BaseExpression, site: CallSite) -> bool:
    """`bool(t)` / `bool(ids == eos)` where `t` / `ids` is a torch tensor of unknown placement (an
    annotated `torch.Tensor`, a slice of one): as `.item()`, a sync unless it is on the host."""
    operands = [expr]
    if isinstance(expr, cst.Comparison):
        operands = [expr.left, *(c.comparator for c in expr.comparisons)]
    return any(model.kind_of(o, site.function).kind in (Kind.TENSOR, Kind.DEVICE_TENSOR) for o in operands)


# tensor methods whose result is a tensor a test compares (`x.max() > 1`): a 0-d tensor, not a number
_REDUCTIONS = frozenset({"max", "min", "sum", "mean", "any", "all", "amax", "amin", "norm", "count_nonzero", "isnan", "isinf"})


def _truth_operand(test: cst.BaseExpression, node: cst.Call) -> bool:
    """`node` is what an `if`/`while` takes the truth of: the test itself, an operand of a
    comparison it is, or of `and`/`or`/`not` around those."""
    pending = [test]
    while pending:
        current = pending.pop()
        if current is node:
            return True
        if isinstance(current, cst.Comparison):
            pending += [current.left, *(c.comparator for c in current.comparisons)]
        elif isinstance(current, cst.BooleanOperation):
            pending += [current.left, current.right]
        elif isinstance(current, cst.UnaryOperation):
            pending.append(current.expression)
    return False


def _device_tensor_value(model: ModuleModel, site: CallSite) -> bool:
    """The reduced value lives on the GPU: its receiver is a CUDA tensor or one of unknown
    placement, or (kind unknown) hangs off a tensor argument of an nn.Module's `forward`, an
    activation, which capture-reachable forwards get on the device."""
    kind = receiver_kind(model, site).kind
    if kind in (Kind.DEVICE_TENSOR, Kind.TENSOR):
        return True
    if kind is not Kind.UNKNOWN:
        return False
    fn = site.function
    if not (fn.name == "forward" and fn.cls is not None and fn.cls.is_nn_module):
        return False
    return site.receiver is not None and _activation(model, fn, site.receiver, 0)


def _activation(model: ModuleModel, fn: FunctionInfo, expr: cst.BaseExpression, depth: int) -> bool:
    """`expr` is computed from the forward's tensor arguments or its submodules' outputs
    (`x.abs()`, `torch.isnan(out)` where `out = self.block(x)`): an activation, on the device
    whenever a capture runs the forward."""
    if depth > 4:
        return False
    while True:
        if isinstance(expr, cst.Attribute | cst.Subscript):
            expr = expr.value  # `x.T`, `x[0]`
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and self_attribute(expr.func) is None
            and model.qualname(expr.func) is None
        ):
            expr = expr.func.value  # a method of the value: `x.abs()`
        else:
            break
    if isinstance(expr, cst.Call):
        if self_attribute(expr.func) is not None:
            return True  # `self.block(x)`: a submodule's output
        if (model.qualname(expr.func) or "").startswith("torch.") and expr.args:
            return _activation(model, fn, expr.args[0].value, depth + 1)  # `torch.isnan(out)`
        return False
    if not isinstance(expr, cst.Name) or expr.value == "self":
        return False
    if model.kind_of(expr, fn).kind not in (Kind.UNKNOWN, Kind.TENSOR, Kind.DEVICE_TENSOR):
        return False
    if expr.value in parameter_names(fn.node.params):
        return True
    bound = [a.value for a in fn.assignments if any(isinstance(t, cst.Name) and t.value == expr.value for t in a.targets)]
    return bool(bound) and all(v is not None and _activation(model, fn, v, depth + 1) for v in bound)


def _looks_like_tensor_expr(expr: cst.BaseExpression) -> bool:
    """For receivers of unknown kind: a name, attribute, subscript or a call result (`x.sum()`)
    - anything but literals and containers, which are never tensors."""
    return isinstance(expr, cst.Name | cst.Attribute | cst.Subscript | cst.Call)


def _in_reraising_handlers(fn: cst.FunctionDef) -> set[int]:
    """The nodes inside the `except` handlers of `fn` whose body ends by raising."""
    inside: set[int] = set()
    for node in walk(fn.body):
        if isinstance(node, cst.ExceptHandler | cst.ExceptStarHandler) and _ends_raising(node.body):
            inside.update(id(n) for n in walk(node.body))
    return inside


def _ends_raising(block: cst.BaseSuite) -> bool:
    if isinstance(block, cst.SimpleStatementSuite):
        smalls: Sequence[cst.BaseSmallStatement] = block.body
    else:
        last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else None
        smalls = last.body if isinstance(last, cst.SimpleStatementLine) else ()
    return any(isinstance(small, cst.Raise) for small in smalls)
