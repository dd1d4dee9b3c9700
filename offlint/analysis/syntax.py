"""Fast tree walking over libcst nodes.

`CSTNode.children` runs a full visitor per call and dominated the model's cost (profiled on
DeepSpeed's stage3.py: 2.1 s of 4.8 s). These helpers read the dataclass fields directly, in
declaration order (close to source order), and skip the whitespace and punctuation fields, which
never hold code the rules look at.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst

_SKIPPED_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "leading_lines",
        "lines_after_decorators",
        "header",
        "footer",
        "trailing_whitespace",
        "newline",
        "colon",
        "equal",
        "star",
        "dot",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "whitespace",
    }
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _code_fields(node_type: type) -> tuple[str, ...]:
    names = _FIELDS.get(node_type)
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(node_type)
            if f.name not in _SKIPPED_FIELDS and not f.name.startswith("whitespace")
        )
        _FIELDS[node_type] = names
    return names


# type -> "is a code-bearing node"; isinstance against libcst's ABCs is slow, a dict is not
_IS_CODE_NODE: dict[type, bool] = {}


def _is_code_node(value_type: type) -> bool:
    known = _IS_CODE_NODE.get(value_type)
    if known is None:
        known = issubclass(value_type, cst.CSTNode) and not issubclass(
            value_type, cst.BaseParenthesizableWhitespace
        )
        _IS_CODE_NODE[value_type] = known
    return known


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The code-bearing children of a node, in field order."""
    found: list[cst.CSTNode] = []
    for name in _code_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            found.extend(v for v in value if _is_code_node(type(v)))
        elif _is_code_node(value_type):
            found.append(value)
    return found


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order over `node` and everything below it."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(child_nodes(current)))
