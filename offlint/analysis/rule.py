"""The unit of the catalogue's logic: one `Rule` subclass per module in `analysis/rules/`.

A rule reads the `ModuleModel` and yields `Finding`s; the engine turns them into `Diagnostic`s
with the message, fix title and safety from the rule's file in `rules/` - the rule module never
repeats those texts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst

from offlint.analysis.model import ModuleModel
from offlint.diagnostics import Confidence


@dataclass(frozen=True)
class Finding:
    node: cst.CSTNode
    # values for the `{placeholders}` of the rule's message
    details: dict[str, str] = field(default_factory=dict)
    note: str = ""  # filled by the engine (see Rule.explains_reachability)
    # how capture reaches it: filled by the engine from where the finding is, unless the rule
    # knows better from its own evidence (OFL108: the tree captures in global mode)
    confidence: Confidence | None = None


class Rule:
    code: ClassVar[str]
    # Text the file must contain for this rule to be able to fire (any one of them). The engine
    # never parses a file that matches no selected rule's tokens.
    tokens: ClassVar[tuple[str, ...]] = ()
    # True for rules that fire only in capture-reachable code: their diagnostics say why the code
    # is capture-reachable (the reason the model recorded for the function holding the call)
    explains_reachability: ClassVar[bool] = False

    def find(self, model: ModuleModel) -> Iterator[Finding]:
        raise NotImplementedError


def code_of(node: cst.CSTNode, model: ModuleModel) -> str:
    """Source text of a node, for messages (`self.alt_stream`), on one line: line breaks and the
    indentation after them (which libcst prints relative to the node) become one space."""
    text = model.code_for(node)
    if "\n" in text:
        text = _LINE_BREAK.sub(" ", text)
        text = _SPACE_AFTER_OPENING.sub(r"\1", _SPACE_BEFORE_CLOSING.sub(r"\1", text))
    return text if len(text) <= 60 else text[:57] + "..."


_LINE_BREAK = re.compile(r"[ \t]*(?:\\)?\r?\n\s*")
_SPACE_AFTER_OPENING = re.compile(r"([(\[{]) ")
_SPACE_BEFORE_CLOSING = re.compile(r" ([)\]}])")


def findings_of(rule: Rule, model: ModuleModel) -> list[Finding]:
    """What `rule` finds on `model`, found once: `check` reports them and the fixers confirming
    `[*]` on the same model start from them (a fix lives on the finding it fixes)."""
    return model.remembered(("findings of", rule.code), lambda: list(rule.find(model)))
