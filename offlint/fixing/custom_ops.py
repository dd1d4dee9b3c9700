"""Compile-safe offloader rewrite: the stream and event work as `torch.library.custom_op`s.

Dynamo traces stream and event ops, but Inductor then runs them on the stream that was current
when it traced, not on a capture stream: a hand capture of the compiled forward failed with 905
at `torch.ops.streams.wait_event` (shared/GROUND-TRUTH.md section 4). A custom op is opaque to
Dynamo: its body runs at run time on the stream then current, and its fake implementation is
all the tracer sees. vLLM keeps its prefetch in such ops (`start_prefetch`/`wait_prefetch`).

The producer's fork, copy and event record become one op and the consumer's wait another, both
declaring the device tensors mutated: that orders the wait after the copy and every read of the
tensors after the wait, and keeps the ops from being dead-code eliminated (they return nothing).
The device tensors are made in traced code (`torch.empty_like`) so the compiler owns them; the op
copies the host tensors into them on the side stream. The ops find their offloader by an int key
(custom ops take tensors and scalars only) in a weak registry, so no offloader is kept alive.

What the ops do not give: an order against the compute between them. vLLM ties its ops to the
layer's activation (each declares it mutated); this shape's producer and consumer never see an
activation, so Inductor may schedule the copy right before its wait (measured on the H200:
benchmarks/results/fix-custom-ops-h200-2026-12-05.json).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from offlint.analysis.kinds import self_attribute
from offlint.fixing.shape import OffloaderShape, is_docstring, top_level_statements

REGISTRY = "_offlint_offloaders"
KEY_ATTR = "_offlint_key"


@dataclass(frozen=True)
class HostCopy:
    """The producer stores `{k: v.to(<device>, non_blocking=True) for k, v in <host>.items()}`
    (directly or returned by a method of the class): one H2D copy per host tensor."""

    host: str  # `self._host_params`
    device: str  # `"cuda"`


def _returned(shape: OffloaderShape, value: cst.BaseExpression) -> cst.BaseExpression:
    """`self.m()` with a method `m` of the class whose body is one `return X`: X."""
    if (
        isinstance(value, cst.Call)
        and not value.args
        and isinstance(value.func, cst.Attribute)
        and isinstance(value.func.value, cst.Name)
        and value.func.value.value == "self"
    ):
        method = shape.cls.methods.get(value.func.attr.value)
        if method is not None:
            body = [s for s in top_level_statements(method) if not is_docstring(s)]
            if (
                len(body) == 1
                and isinstance(body[0], cst.SimpleStatementLine)
                and isinstance(body[0].body[0], cst.Return)
                and body[0].body[0].value is not None
            ):
                return body[0].body[0].value
    return value


def host_copy(shape: OffloaderShape, module: cst.Module) -> HostCopy | None:
    value = _returned(shape, shape.produce_value)
    if not isinstance(value, cst.DictComp) or value.for_in.inner_for_in or value.for_in.ifs:
        return None
    comp = value.for_in
    target, it, call = comp.target, comp.iter, value.value
    if not (
        isinstance(target, cst.Tuple)
        and len(target.elements) == 2
        and all(isinstance(e.value, cst.Name) for e in target.elements)
        and isinstance(it, cst.Call)
        and not it.args
        and isinstance(it.func, cst.Attribute)
        and it.func.attr.value == "items"
        and isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "to"
    ):
        return None
    key, tensor = (e.value for e in target.elements)
    assert isinstance(key, cst.Name) and isinstance(tensor, cst.Name)
    if not (
        isinstance(value.key, cst.Name)
        and value.key.value == key.value
        and isinstance(call.func.value, cst.Name)
        and call.func.value.value == tensor.value
    ):
        return None
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    device = positional[0].value if len(positional) == 1 else keywords.get("device")
    blocking = keywords.get("non_blocking")
    if (
        device is None
        or len(positional) + len(keywords) != 2
        or not (isinstance(blocking, cst.Name) and blocking.value == "True")
    ):
        return None
    host = it.func.value
    if self_attribute(host) is None:  # a local would not be in scope where the copy is issued
        return None
    return HostCopy(host=module.code_for_node(host), device=module.code_for_node(device))


class _SelfToOffloader(cst.CSTTransformer):
    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value="offloader") if updated_node.value == "self" else updated_node


def op_body_lines(module: cst.Module, stmts: list[cst.BaseStatement]) -> str:
    """The statements as code in the op's body: `self` is the offloader the key names; own
    comments dropped (they describe the method)."""
    out = []
    for stmt in stmts:
        node = stmt.visit(_SelfToOffloader())
        assert isinstance(node, cst.BaseStatement)
        if isinstance(node, cst.SimpleStatementLine):
            node = node.with_changes(leading_lines=[], trailing_whitespace=cst.TrailingWhitespace())
        elif isinstance(node, cst.BaseCompoundStatement):
            node = node.with_changes(leading_lines=[])
        out.append(module.code_for_node(node))
    return "".join(out)


def indent(code: str, by: str = "    ") -> str:
    return "".join(by + line if line.strip() else line for line in code.splitlines(keepends=True))


def leading_lines(stmt: cst.BaseStatement) -> list[cst.EmptyLine]:
    if isinstance(stmt, cst.SimpleStatementLine | cst.BaseCompoundStatement):
        return list(stmt.leading_lines)
    return []
