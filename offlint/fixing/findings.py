"""The findings a fixer acts on: the rule's own findings on the model the fixer plans on, at the
confidence floor `check` shows, with the node each was reported at. A fixer starts from these
(the wait call of an OFL101 finding, the fork of an OFL103 one) and never re-detects a hazard by
its spelling."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from offlint.analysis.model import CallSite, ModuleModel
from offlint.analysis.reachability import finding_reach
from offlint.analysis.rule import Rule, findings_of
from offlint.analysis.syntax import walk
from offlint.diagnostics import Confidence
from offlint.fixing.edits import Owner


@dataclass(frozen=True)
class Found:
    code: str
    node: cst.CSTNode
    confidence: Confidence


def _rule(code: str) -> Rule:
    from offlint.analysis.rules import all_rules

    return all_rules()[code]()


def findings(model: ModuleModel, codes: tuple[str, ...], floor: Confidence) -> Iterator[Found]:
    """The findings of rules `codes` on `model` that `check` shows at `floor`."""
    for code in codes:
        rule = _rule(code)
        for finding in findings_of(rule, model):
            confidence, _ = finding_reach(model, finding.node, rule.explains_reachability)
            confidence = finding.confidence or confidence
            if confidence.at_least(floor):
                yield Found(code, finding.node, confidence)


def at_call_sites(model: ModuleModel, codes: tuple[str, ...], floor: Confidence) -> Iterator[tuple[Found, CallSite]]:
    """The findings of `codes` reported at a call (a wait, a fork), each with its call site (the
    module's sites indexed once)."""
    by_node = model.remembered(("call sites by node",), lambda: {id(site.node): site for site in model.all_calls()})
    for found in findings(model, codes, floor):
        site = by_node.get(id(found.node))
        if site is not None:
            yield found, site


def owners_within(
    model: ModuleModel, codes: tuple[str, ...], floor: Confidence, nodes: list[cst.CSTNode]
) -> list[Owner]:
    """The findings of `codes` (shown at `floor`) reported inside any of `nodes`: those a
    rewrite of those statements fixes."""
    inside: set[int] = set()
    for node in nodes:
        inside.update(id(n) for n in walk(node))
    return [Owner(found.code, found.node) for found in findings(model, codes, floor) if id(found.node) in inside]
