"""A fork not joined in the same call (OFL103), with no consumer to join at: join it, while
capturing, where the forked work ends.

Starts from each finding's fork (`side.wait_stream(cur)`, `side.wait_event(ev)` after
`ev.record(cur)`) and puts `cur.wait_stream(side)` under `if is_current_stream_capturing():` after
the last statement of the block that holds the fork and the work that follows it (before a final
`return`). A fork made under `if <test>:` whose work follows that branch is joined under the
same test. Eager runs are unchanged (the join only runs while capturing, and joins the callers
still make keep running); a capture no longer ends with the fork open; inside the graph the work
after the join waits for the forked work, so the overlap past this call is lost there. When
the fork's own call hands its result on (an early `return`, a `yield`), there is no single end to
join at and the finding is left, with that reason.

Compile-safe (`compile_safe.py`): the join runs always, under the fork's own condition only,
since torch.compile cannot trace the capture test; eager runs then lose the overlap past this
call too (inside a graph the join is one more edge, free).

Forks whose work a later call consumes through an event are `event_handoff.py`'s (the consumer
joins them): this fixer runs after it, on what is left. A fork another method of the class joins
(`cur.wait_stream(self.side)`) is left with that reason: a join at the end of the forking call
would give up the overlap of every prefetch inside graphs, where one at that consumer keeps it.
"""

from __future__ import annotations

import libcst as cst
from libcst.helpers import parse_template_statement

from offlint.analysis.model import CallSite, FunctionInfo, ModuleModel
from offlint.analysis.streams import fork_key, is_join_of
from offlint.analysis.syntax import same_code, walk
from offlint.diagnostics import Confidence
from offlint.fixing.capture_test import CaptureTestSpelling
from offlint.fixing.edits import Owner, StatementPlan
from offlint.fixing.event_handoff import RULES as HANDOFF_RULES
from offlint.fixing.event_handoff import handoff_of, paired_waits, plan_event_handoffs
from offlint.fixing.findings import Found, at_call_sites

RULES = ("OFL103",)


def plan_fork_joins(model: ModuleModel, floor: Confidence, *, compile_safe: bool = False) -> StatementPlan:
    plan = StatementPlan()
    spelling = None if compile_safe else CaptureTestSpelling(model, plan, RULES)
    anchored: set[int] = set()
    handed_off = _left_handoff_producers(model, floor) if compile_safe else set()
    unfixed: dict[int, str] | None = None  # asked only when a fork has a paired wait
    for found, site in at_call_sites(model, RULES, floor):
        pairs = paired_waits(model, site, floor)
        if pairs and id(site.function) not in handed_off:  # those are left below, with their reason
            if unfixed is None:
                unfixed = _unfixed_waits(model, floor, compile_safe)
            left = [(wait, unfixed[id(wait.node)]) for wait, _ in pairs if id(wait.node) in unfixed]
            if left:
                plan.not_fixed.append((found.code, found.node, _pair_reason(model, left[0][0], left[0][1])))
                continue
        owner = Owner(found.code, found.node)
        for wait, _ in pairs:  # the fork and the wait on its event: fixed together or not at all
            plan.join_units(owner, Owner(wait.code, wait.node))
        with plan.owning([owner]):
            placed = _join(model, site, spelling)
        if isinstance(placed, str):
            plan.not_fixed.append((found.code, found.node, placed))
            continue
        if id(site.function) in handed_off:
            plan.not_fixed.append((found.code, found.node, _HANDED_OFF))
            continue
        anchor, before, join = placed
        if id(anchor) in anchored:
            plan.not_fixed.append((found.code, found.node, "a second fork ends where another is joined"))
            continue
        anchored.add(id(anchor))
        title = (
            "join the fork where its work ends (overlap past this call is lost)"
            if compile_safe
            else "join the fork while capturing where its work ends (overlap past this call is lost in graphs)"
        )
        with plan.owning([owner]):
            if before:
                plan.insert_before(anchor, [join], RULES, title)
            else:
                plan.insert_after(anchor, [join], RULES, title)
    return plan


_HANDED_OFF = (
    "its copy is waited on in a later call through an event, a hand-off compile-safe leaves (it needs "
    "the capture state at run time): a join here alone would not make the wait capturable"
)


def _unfixed_waits(model: ModuleModel, floor: Confidence, compile_safe: bool) -> dict[int, str]:
    """The waits (ids of their finding nodes) that neither wait fixer fixes, with their reasons.
    `fix` runs those fixers before this one (a wait they fix is gone by then); `check` plans every
    fixer on the text it read: asking them here gives both the same answer."""
    from offlint.fixing.external_event import plan_external_events

    reasons: dict[int, list[str]] = {}
    plans = (
        plan_event_handoffs(model, floor, compile_safe=compile_safe),
        plan_external_events(model, floor, compile_safe=compile_safe),
    )
    for plan in plans:
        for code, node, reason in plan.not_fixed:
            if code == "OFL101":
                reasons.setdefault(id(node), []).append(reason)
    return {node: "; ".join(found) for node, found in reasons.items() if len(found) == len(plans)}


def _pair_reason(model: ModuleModel, wait: Found, why: str) -> str:
    shown = model.code_for(wait.node)
    return (
        f"its pair, the wait `{shown}` (OFL101) on the event this fork's copy records, could not be "
        f"fixed ({why}); a join here alone would silence this finding while that wait still fails "
        "the capture (905): fix the wait first, or record its event in the capture that waits on it"
    )


def _left_handoff_producers(model: ModuleModel, floor: Confidence) -> set[int]:
    """ids of the methods producing the hand-offs `event_handoff.py` would rewrite (compile-safe
    leaves them): their forks are the consumer's to join, as in the default mode."""
    producers: set[int] = set()
    for _, site in at_call_sites(model, HANDOFF_RULES, floor):
        handoff = handoff_of(model, site)
        if handoff is not None:
            producers.add(id(handoff.producer.method))
    return producers


def _consumer(model: ModuleModel, site: CallSite) -> FunctionInfo | None:
    """Another method of the class that joins the forked stream (`cur.wait_stream(self.side)`):
    the consumer, where a join keeps the overlap."""
    fn = site.function
    key = fork_key(model, site)
    if fn.cls is None or key is None:
        return None
    for method in fn.cls.methods.values():
        if method is fn:
            continue
        for join in method.calls:
            if join.method == "wait_stream" and is_join_of(model, join, key):
                return method
    return None


def _current_stream(model: ModuleModel, site: CallSite) -> cst.BaseExpression | str:
    """The stream the fork waits on: `cur` of `side.wait_stream(cur)`, or the stream `ev` was
    recorded on for `side.wait_event(ev)`."""
    if site.method == "wait_stream" and site.node.args:
        return site.node.args[0].value
    if site.method == "wait_event" and site.node.args:
        event = site.node.args[0].value
        for record in site.function.calls:
            if (
                record.order < site.order
                and record.method == "record"
                and record.receiver is not None
                and same_code(record.receiver, event)
            ):
                if record.node.args:
                    return record.node.args[0].value
                return cst.parse_expression("torch.cuda.current_stream()")
        return f"the stream `{model.code_for(event)}` was recorded on is not in this call"
    return "not a fork this fixer knows (`wait_stream`/`wait_event`)"


def _suite_of(fn: FunctionInfo, line: cst.BaseStatement) -> tuple[cst.IndentedBlock, cst.CSTNode] | None:
    """The block holding `line` directly, and the statement (or function) that owns the block."""
    for owner in walk(fn.node):
        if owner is not fn.node and isinstance(owner, cst.FunctionDef | cst.ClassDef | cst.Lambda):
            continue
        for block in _blocks(owner):
            if any(s is line for s in block.body):
                return block, owner
    return None


def _blocks(owner: cst.CSTNode) -> list[cst.IndentedBlock]:
    found = []
    for name in ("body", "orelse", "finalbody"):
        child = getattr(owner, name, None)
        if isinstance(child, cst.IndentedBlock):
            found.append(child)
        elif isinstance(child, cst.Else | cst.Finally) and isinstance(child.body, cst.IndentedBlock):
            found.append(child.body)
    return found


def _statement_of(fn: FunctionInfo, node: cst.CSTNode) -> cst.BaseStatement | None:
    best = None
    for stmt in walk(fn.node.body):
        if isinstance(stmt, cst.SimpleStatementLine | cst.BaseCompoundStatement) and any(n is node for n in walk(stmt)):
            best = stmt
    return best


def _join(
    model: ModuleModel, site: CallSite, spelling: CaptureTestSpelling | None
) -> tuple[cst.BaseStatement, bool, cst.BaseStatement] | str:
    fn = site.function
    side = site.receiver
    assert side is not None
    consumer = _consumer(model, site)
    if consumer is not None:
        return (
            f"`{consumer.qualname}` already joins `{model.code_for(side)}` in a later call (a staged "
            "fork/join pair): keep the calls from this fork to that join inside one capture or wholly "
            "outside it, which their caller decides; a join here would give up the overlap"
        )
    current = _current_stream(model, site)
    if isinstance(current, str):
        return current
    line = _statement_of(fn, site.node)
    found = _suite_of(fn, line) if line is not None else None
    if line is None or found is None:
        return "the fork is not a statement of its own in a block"
    block, owner = found
    condition: cst.BaseExpression | None = None
    if block.body[-1] is line and isinstance(owner, cst.If) and owner.orelse is None:
        # `if test: side.wait_stream(cur)` with the work after the branch: join under the test
        outer = _suite_of(fn, owner)
        if outer is None:
            return "the fork ends its branch and the branch's block cannot be found"
        condition = owner.test
        line, (block, owner) = owner, outer
    if block.body[-1] is line:
        return f"nothing follows the fork in `{fn.qualname}`: its work is issued by another call"
    after = list(block.body)[list(block.body).index(line) + 1 :]
    last = after[-1]
    final_return = isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in last.body)
    checked = after[:-1] if final_return else after
    for stmt in checked:
        for node in walk(stmt):
            if isinstance(node, cst.FunctionDef | cst.ClassDef | cst.Lambda):
                continue
            if isinstance(node, cst.Return | cst.Yield):
                return (
                    f"`{fn.qualname}` can leave after the fork before its work ends (a `return` or `yield` "
                    "inside): no single place to join"
                )
    if spelling is None:  # compile-safe: join always (under the fork's own condition)
        join = _unconditional_join(condition, current, side)
    else:
        join = _join_while_capturing(spelling, condition, current, side)
    return last, final_return, join


def _join_while_capturing(
    spelling: CaptureTestSpelling,
    condition: cst.BaseExpression | None,
    current: cst.BaseExpression,
    side: cst.BaseExpression,
) -> cst.BaseStatement:
    test = spelling.call() if condition is None else cst.BooleanOperation(
        left=spelling.call(),
        operator=cst.And(),
        right=condition.deep_clone().with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if isinstance(condition, cst.BooleanOperation)
        else condition.deep_clone(),
    )
    return parse_template_statement(
        "if {test}:\n    {current}.wait_stream({side})\n",
        test=test,
        current=current.deep_clone(),
        side=side.deep_clone(),
    ).with_changes(
        leading_lines=[
            cst.EmptyLine(comment=cst.Comment("# While capturing, join the fork before this call ends: a capture must not end")),
            cst.EmptyLine(comment=cst.Comment("# with it open. Eager runs join it where they always did.")),
        ]
    )


def _unconditional_join(
    condition: cst.BaseExpression | None, current: cst.BaseExpression, side: cst.BaseExpression
) -> cst.BaseStatement:
    """Compile-safe: no capture test (torch.compile cannot trace one). Joining eagerly as well
    costs the overlap past this call; inside a graph a stream wait is only an edge."""
    comments = [
        cst.EmptyLine(comment=cst.Comment("# Join the fork before this call ends: a capture must not end with it open. Always,")),
        cst.EmptyLine(comment=cst.Comment("# not only while capturing: torch.compile cannot trace a capture test (compile-safe).")),
    ]
    join = parse_template_statement(
        "{current}.wait_stream({side})\n", current=current.deep_clone(), side=side.deep_clone()
    )
    if condition is None:
        return join.with_changes(leading_lines=comments)
    return parse_template_statement(
        "if {test}:\n    {join}\n", test=condition.deep_clone(), join=join
    ).with_changes(leading_lines=comments)
