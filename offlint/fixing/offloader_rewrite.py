"""Make a prefetch/wait offloader (see `shape.py`) capture-aware.

Two strategies, both meeting the six guarantees of shared/GROUND-TRUTH.md:

`overlap` ("primed"): no prefetch crosses a forward boundary. A forward pre-hook on the first
module issues each forward's own first copies; the end-of-module hook prefetches only modules of
the same forward (the wrap-around goes away); nothing is prefetched in `post_init`. Every copy is
forked from the current stream and joined by the module that uses it, in the same forward, so
inside a capture no wait reaches an event recorded outside it and nothing is left unjoined; the
device tensors a forward uses are made by that forward (in a capture they live in the graph's
private pool, at addresses fixed for the graph's lifetime), so eager code never reads a tensor
made inside a capture. The consumer still checks that the pending copy was issued on its side
of the capture boundary (a tag recorded with the event) and otherwise copies now.

`inline`: the smallest correct change. Under capture the producer issues nothing and the
consumer copies on the capture stream and waits on nothing; what it makes is handed only to
captured code, never kept on `self`; an eager consumer that finds nothing pending loads first.
One copy per module per replay, no overlap inside the graph.

Compile-safe (`compile_safe.py`): the primed overlap only, whatever the strategy, and without the
capture tag. Since no prefetch crosses a forward boundary, the copy a consumer finds pending was
issued by its own forward, on its side of any capture boundary; a flag the producer sets and the
wait takes (Python state, which Dynamo guards on) says whether one is pending. The inline rewrite
and the end-of-forward join fallback branch on the capture state at run time, so a shape the
primed overlap does not fit is left, with the reason.
"""

from __future__ import annotations

import libcst as cst

from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import FunctionInfo, ModuleModel
from offlint.analysis.syntax import walk
from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE, Confidence
from offlint.fixing.capture_modes import CAPTURE_MODES, defeating
from offlint.fixing.capture_test import CaptureTestSpelling
from offlint.fixing.edits import StatementPlan, leading_lines_of, statements
from offlint.fixing.findings import owners_within
from offlint.fixing.shape import (
    OffloaderShape,
    contains,
    find_shapes,
    is_docstring,
    top_level_statements,
)

OVERLAP = "overlap"
INLINE = "inline"
AUTO = "auto"
STRATEGIES = (AUTO, OVERLAP, INLINE)
# rules the rewrite fixes: any of them selected enables it
REWRITE_RULES = ("OFL101", "OFL102", "OFL103", "OFL201", "OFL202")
_PLACEHOLDER = "__offlint_placeholder__"
_FORWARD_START_HOOK = "_on_forward_start"
_JOIN_METHOD = "join_pending_copies"
_JOIN_HELPER = "join_offloader_copies"


def plan_offloader_fix(
    model: ModuleModel,
    strategy: str,
    *,
    compile_safe: bool = False,
    floor: Confidence = DEFAULT_MIN_CONFIDENCE,
    capture_modes: tuple[str, ...] = CAPTURE_MODES,
) -> tuple[StatementPlan, list[str]]:
    """The statement changes for every hazardous offloader shape; and the strategy used per
    shape (for the report). `compile_safe`: only the primed overlap, with no capture test (see
    `compile_safe.py`); a shape it does not fit is left, with the reason."""
    plan = StatementPlan()
    used: list[str] = []
    spelling = CaptureTestSpelling(model, plan)
    for shape in find_shapes(model):
        if not shape.hazards:
            continue
        with plan.owning(owners_within(model, REWRITE_RULES, floor, _shape_nodes(shape))):
            _plan_shape(model, shape, _strategy_for(shape, strategy, capture_modes, plan), plan, spelling, used, compile_safe=compile_safe)
    return plan, used


def _strategy_for(shape: OffloaderShape, strategy: str, modes: tuple[str, ...], plan: StatementPlan) -> str:
    """`auto`: the primed overlap where every named capture mode keeps its fork and join in one
    graph (whole forwards only), else the inline rewrite, which forks nothing while capturing."""
    if strategy != AUTO:
        return strategy
    found = defeating(f"offloader-{OVERLAP}", modes)
    if found is None:
        return AUTO
    plan.note(
        f"{shape.cls.name}: inline rewrite, not the primed overlap: under capture mode `{found[0]}` {found[1]}. "
        "The inline rewrite copies on the capturing stream (no overlap inside a graph); if your engine "
        'captures whole forwards only, set `[tool.offlint] capture-modes = ["whole"]` for the overlap'
    )
    return INLINE


def _shape_nodes(shape: OffloaderShape) -> list[cst.CSTNode]:
    """The statements a rewrite of `shape` owns: its class, and the methods elsewhere that
    prefetch into it (wrap-arounds, priming loops, the owner that builds the offloaders)."""
    nodes: list[cst.CSTNode] = [shape.cls.node]
    nodes += [wrap.function.node for wrap in shape.wrap_arounds]
    nodes += [primer.method.node for primer in shape.primers]
    if shape.modules_return is not None:
        nodes.append(shape.modules_return.method.node)
    return nodes


def _plan_shape(
    model: ModuleModel,
    shape: OffloaderShape,
    strategy: str,
    plan: StatementPlan,
    spelling: CaptureTestSpelling,
    used: list[str],
    *,
    compile_safe: bool,
) -> None:
    name = shape.cls.name
    if compile_safe:
        missing = _overlap_missing(shape)
        if missing:
            _leave(
                shape,
                plan,
                f"compile-safe: the primed overlap does not fit ({missing}), and the other offloader "
                "rewrites need the capture state at run time, which torch.compile(fullgraph=True) "
                "cannot trace; fix it with --no-compile-safe where this code is not compiled",
            )
            plan.note(f"{name}: not rewritten (compile-safe needs the primed overlap: {missing})")
            return
        if strategy == INLINE:
            plan.note(
                f"{name}: compile-safe uses the primed overlap, not inline (the inline rewrite "
                "branches on the capture state at run time)"
            )
        with plan.labelled(f"offloader-{OVERLAP}"):
            _plan_overlap(model, shape, plan, spelling, compile_safe=True)
        used.append(OVERLAP)
        return
    if strategy in (AUTO, OVERLAP):
        missing = _overlap_missing(shape)
        if not missing:
            with plan.labelled(f"offloader-{OVERLAP}"):
                _plan_overlap(model, shape, plan, spelling)
            used.append(OVERLAP)
            return
        if not _join_missing(model, shape):
            with plan.labelled(f"offloader-{OVERLAP}"):
                plan.note(_plan_join(model, shape, plan, spelling, missing))
            used.append(OVERLAP)
            return
        plan.note(
            f"{name}: overlap strategy not applicable ({missing}); used inline instead. To keep the "
            f"overlap, call `{_FORWARD_START_HOOK}` (issue the first `prefetch_step` copies) at the start "
            "of every forward and drop the wrap-around prefetch"
        )
    problem = _inline_missing(model, shape)
    if problem:
        plan.note(f"{name}: not rewritten ({problem})")
        _leave(shape, plan, f"the offloader rewrite does not fit: {problem}")
        return
    with plan.labelled(f"offloader-{INLINE}"):
        _plan_inline(model, shape, plan, spelling)
    used.append(INLINE)


# ----------------------------------------------------------------------------- shared pieces


def _leave(shape: OffloaderShape, plan: StatementPlan, reason: str) -> None:
    """Say why the shape's findings stay: the rewrite's rules, at every call of its producer and
    consumer (where they are reported)."""
    for fn in (shape.producer, shape.consumer):
        for site in fn.calls:
            for code in REWRITE_RULES:
                plan.not_fixed.append((code, site.node, reason))


def _substitute(
    stmts: list[cst.BaseStatement], nodes: list[cst.BaseStatement]
) -> list[cst.BaseStatement]:
    """Replace each `__offlint_placeholder__()` line, in order, by the next of `nodes` (deep
    copies of original statements), keeping the placeholder's leading comments."""
    queue = list(nodes)

    class Substitute(cst.CSTTransformer):
        def leave_SimpleStatementLine(
            self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
        ) -> cst.BaseStatement:
            if (
                len(updated_node.body) == 1
                and isinstance(updated_node.body[0], cst.Expr)
                and isinstance(updated_node.body[0].value, cst.Call)
                and isinstance(updated_node.body[0].value.func, cst.Name)
                and updated_node.body[0].value.func.value == _PLACEHOLDER
            ):
                node = queue.pop(0).deep_clone()
                # the original's own comments move with it (its blank lines do not)
                own = [line for line in leading_lines_of(node) if line.comment is not None]
                return node.with_changes(leading_lines=[*updated_node.leading_lines, *own])
            return updated_node

    out = []
    for stmt in stmts:
        result = stmt.visit(Substitute())
        assert isinstance(result, cst.BaseStatement)
        out.append(result)
    return out


def _first_body_statement(fn: FunctionInfo, skip: list[cst.If]) -> cst.BaseStatement | None:
    for stmt in top_level_statements(fn):
        if is_docstring(stmt) or any(stmt is s for s in skip):
            continue
        return stmt
    return None


def _strip_capture_branches(shape: OffloaderShape, plan: StatementPlan, why: str) -> None:
    for branch in shape.producer_capture_branches + shape.consumer_capture_branches:
        plan.replace(
            branch, None, ("OFL201", "OFL101"), f"drop the earlier capturing branch ({why})"
        )


def _unwrapped_wait(shape: OffloaderShape) -> cst.BaseStatement:
    """The wait statement without an `if self.E is not None:` around it."""
    stmt = shape.wait_statement
    if (
        isinstance(stmt, cst.If)
        and stmt.orelse is None
        and isinstance(stmt.body, cst.IndentedBlock)
        and len(stmt.body.body) == 1
        and contains(stmt.body.body[0], shape.wait_call)
        and isinstance(stmt.test, cst.Comparison)
        and self_attribute(stmt.test.left) == shape.event_attr
    ):
        return stmt.body.body[0]
    return stmt


def _local_names(fn: FunctionInfo) -> set[str]:
    names = set()
    for assign in fn.assignments:
        for target in assign.targets:
            stack = [target]
            while stack:  # plain names, also inside tuple/list targets; never `self` of `self.x`
                node = stack.pop()
                if isinstance(node, cst.Name):
                    names.add(node.value)
                elif isinstance(node, cst.Tuple | cst.List):
                    stack.extend(e.value for e in node.elements)
                elif isinstance(node, cst.StarredElement):
                    stack.append(node.value)
    params = fn.node.params
    for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
        if param.name.value != "self":
            names.add(param.name.value)
    return names


def _free_names(expr: cst.BaseExpression) -> set[str]:
    """Names an expression reads (attribute names and keyword names excluded)."""
    found: set[str] = set()
    skip: set[int] = set()
    for node in walk(expr):
        if isinstance(node, cst.Attribute):
            skip.add(id(node.attr))
        if isinstance(node, cst.Arg) and node.keyword is not None:
            skip.add(id(node.keyword))
        if isinstance(node, cst.CompFor):
            for target in walk(node.target):
                if isinstance(target, cst.Name):
                    skip.add(id(target))
    bound_in_comprehensions = {
        n.value
        for node in walk(expr)
        if isinstance(node, cst.CompFor)
        for n in walk(node.target)
        if isinstance(n, cst.Name)
    }
    for node in walk(expr):
        if (
            isinstance(node, cst.Name)
            and id(node) not in skip
            and node.value not in bound_in_comprehensions
        ):
            found.add(node.value)
    return found


# ----------------------------------------------------------------------------- overlap


def _overlap_missing(shape: OffloaderShape) -> str:
    if shape.offload is None:
        return f"no method of {shape.cls.name} drops `self.{shape.tensors_attr}` after use"
    if not shape.primers:
        return (
            "no priming loop (`for i in range(k): offloaders[i]."
            + shape.producer.name
            + "()`) to move into a forward-start hook"
        )
    if shape.modules_return is None:
        return f"no method of {shape.primers[0].owner.name} that builds the offloaders returns the modules, so the forward-start hook has no place"
    if len({id(p.owner) for p in shape.primers}) != 1:
        return "priming loops in more than one class"
    return ""


def _plan_tagged_wait(
    shape: OffloaderShape,
    plan: StatementPlan,
    capturing: str,
    if_comment: str,
    else_comment: str,
) -> None:
    """Tag the load event with the capture state it was recorded in; the consumer waits on it
    only from the same side of the capture boundary and otherwise copies now."""
    event = f"self.{shape.event_attr}"
    tag = f"self.{shape.tag_attr}"
    plan.insert_after(
        shape.fork_with,
        statements(
            "# Where the event was recorded: the consumer waits on it only from the same side of a\n"
            "# capture boundary.\n"
            f"{tag} = {capturing}\n"
        ),
        ("OFL101", "OFL202"),
        "tag the load event with the capture state it was recorded in",
    )
    if shape.event_init is not None:
        plan.insert_after(
            shape.event_init,
            statements(
                f"# True when {event} was recorded while the current stream was capturing.\n{tag} = False\n"
            ),
            ("OFL101",),
            "initialise the capture tag of the load event",
        )

    wait = _unwrapped_wait(shape)
    moved_asserts = list(shape.tensor_asserts)
    for stmt in moved_asserts:
        plan.replace(stmt, None, ("OFL101",), "check the tensors once they are loaded")
    capturing_local = _fresh_local(shape.consumer, "capturing")
    consumer_text = (
        f"{capturing_local} = {capturing}\n"
        f"if {event} is not None and {tag} == {capturing_local}:\n"
        "    # " + if_comment.replace("\n", "\n    ") + "\n"
        f"    {_PLACEHOLDER}()\n"
        "else:\n"
        "    # " + else_comment.replace("\n", "\n    ") + "\n"
        f"    self.{shape.producer.name}()\n"
        f"    {_PLACEHOLDER}()\n"
    ) + "".join(f"{_PLACEHOLDER}()\n" for _ in moved_asserts)
    replacement = _substitute(statements(consumer_text), [wait, wait, *moved_asserts])
    plan.insert_before(
        shape.wait_statement,
        replacement,
        ("OFL101", "OFL202"),
        "wait only on a copy issued by this forward on this side of the capture boundary, else copy now",
    )
    plan.replace(
        shape.wait_statement, None, ("OFL101",), "the wait moves into the capture-tag check"
    )


def _plan_pending_wait(shape: OffloaderShape, plan: StatementPlan) -> None:
    """Compile-safe consumer of the primed overlap: no capture tag. Every forward issues its own
    first copies and prefetches only within itself, so a pending copy was issued by this
    forward, on this side of any capture boundary; the consumer branches on Python state only
    (a flag the producer sets and its wait takes), which Dynamo guards on."""
    pending = f"self.{shape.pending_attr}"
    plan.insert_after(
        shape.fork_with,
        statements(f"# A copy of this forward is pending; the consumer's wait takes it.\n{pending} = True\n"),
        ("OFL101", "OFL202"),
        "mark the copy pending for its consumer",
    )
    # set before any consumer can read it: next to the event's own initial value, else last in
    # `__init__` (the forward-start hook's offload also clears it)
    init_anchor: cst.BaseStatement | None = shape.event_init
    if init_anchor is None and shape.init is not None:
        init_anchor = next(iter(reversed(top_level_statements(shape.init))), None)
    if init_anchor is not None:
        plan.insert_after(
            init_anchor,
            statements(
                f"# True while a copy issued by this forward waits for its consumer.\n{pending} = False\n"
            ),
            ("OFL101",),
            "initialise the pending flag of the load event",
        )
    assert shape.offload is not None  # the overlap needs one (`_overlap_missing`)
    offload_first = _first_body_statement(shape.offload, [])
    if offload_first is not None:
        plan.insert_before(
            offload_first,
            statements(f"{pending} = False\n"),
            ("OFL101",),
            "drop the pending flag with the tensors",
        )

    wait = _unwrapped_wait(shape)
    moved_asserts = list(shape.tensor_asserts)
    for stmt in moved_asserts:
        plan.replace(stmt, None, ("OFL101",), "check the tensors once they are loaded")
    consumer_text = (
        f"if not {pending}:\n"
        "    # Nothing of this forward is pending (the forward-start hook did not run): copy now,\n"
        "    # forked and joined in this call.\n"
        f"    self.{shape.producer.name}()\n"
        "# No capture test (compile-safe: torch.compile cannot trace one): every forward issues its\n"
        "# own first copies at its start and prefetches only within itself, so the copy waited on\n"
        "# here was issued by this forward, on this side of any capture boundary (inside a capture:\n"
        "# a fork of the same capture). The flag is Python state, which torch.compile guards on.\n"
        f"{_PLACEHOLDER}()\n"
        f"{pending} = False\n"
    ) + "".join(f"{_PLACEHOLDER}()\n" for _ in moved_asserts)
    replacement = _substitute(statements(consumer_text), [wait, *moved_asserts])
    plan.insert_before(
        shape.wait_statement,
        replacement,
        ("OFL101", "OFL202"),
        "wait only on a copy issued by this forward, else copy now (no capture test)",
    )
    plan.replace(shape.wait_statement, None, ("OFL101",), "the wait follows the pending check")


def _plan_overlap(
    model: ModuleModel,
    shape: OffloaderShape,
    plan: StatementPlan,
    spelling: CaptureTestSpelling,
    *,
    compile_safe: bool = False,
) -> None:
    _strip_capture_branches(
        shape, plan, "the primed prefetch never carries a copy across a capture boundary"
    )

    if compile_safe:
        _plan_pending_wait(shape, plan)
    else:
        _plan_tagged_wait(
            shape,
            plan,
            spelling.text,
            "Issued by this forward, on this side of any capture boundary: inside a capture this\n"
            "# joins a fork of the same capture.",
            "Nothing of this forward is pending (the forward-start hook did not run, or the copy\n"
            "# was issued across a capture boundary): copy now, forked and joined in this call.",
        )

    for wrap in shape.wrap_arounds:
        ahead = model.module.code_for_node(wrap.ahead.with_changes(lpar=[], rpar=[]))
        sequence = model.module.code_for_node(wrap.sequence)
        bound = model.module.code_for_node(wrap.bound)
        call = wrap.line.body[0]
        assert isinstance(call, cst.Expr) and isinstance(call.value, cst.Call)
        assert isinstance(call.value.func, cst.Attribute)
        new = statements(
            "# Prefetch only within this forward: a copy issued for the next one would be waited on\n"
            "# in another call (inside a capture: on an event recorded outside it) or never joined.\n"
            "# Each forward issues its own first copies from its forward-start hook.\n"
            f"if {ahead} < {bound}:\n"
            f"    {sequence}[{ahead}].{call.value.func.attr.value}()\n"
        )
        # a trailing comment of the old line stays on the prefetch call
        if_stmt = new[-1]
        assert isinstance(if_stmt, cst.If) and isinstance(if_stmt.body, cst.IndentedBlock)
        inner = if_stmt.body.body[0]
        assert isinstance(inner, cst.SimpleStatementLine)
        inner = inner.with_changes(trailing_whitespace=wrap.line.trailing_whitespace)
        new[-1] = if_stmt.with_changes(body=if_stmt.body.with_changes(body=[inner]))
        plan.replace(wrap.line, None, ("OFL103", "OFL101"), "drop the wrap-around prefetch")
        plan.insert_before(
            wrap.line, new, ("OFL103", "OFL101"), "prefetch only modules of the same forward"
        )

    primer = shape.primers[0]
    owner_methods = primer.owner.methods
    hook_name = (
        _FORWARD_START_HOOK
        if _FORWARD_START_HOOK not in owner_methods
        else "_offlint_on_forward_start"
    )
    for loop in shape.primers:
        siblings = top_level_statements(loop.method)
        if len(siblings) == 1:
            plan.replace(
                loop.loop,
                cst.SimpleStatementLine([cst.Pass()]),
                ("OFL101",),
                "no prefetch before the first forward",
            )
        else:
            plan.replace(loop.loop, None, ("OFL101",), "no prefetch before the first forward")
    assert shape.offload is not None
    hook = statements(
        f"def {hook_name}(self, module, args):\n"
        "    # Primed overlap: each forward issues its own first copies here, forked from the\n"
        "    # current stream and joined by the modules that use them in the same forward, so no\n"
        "    # prefetch crosses a forward (or capture) boundary. Start clean: an aborted forward\n"
        "    # may have left copies pending.\n"
        f"    for offloader in {primer.sequence_text}:\n"
        f"        offloader.{shape.offload.name}()\n"
        f"    {_PLACEHOLDER}()\n"
    )
    hook = _substitute(hook, [primer.loop])
    hook[0] = hook[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    plan.insert_after(
        primer.method.node,
        hook,
        ("OFL101", "OFL103"),
        "issue the first copies at the start of every forward",
    )

    where = shape.modules_return
    assert where is not None
    plan.insert_before(
        where.line,
        statements(
            f"if {primer.sequence_text}:\n"
            f"    {where.modules}[0].register_forward_pre_hook(self.{hook_name})\n"
        ),
        ("OFL101", "OFL103"),
        "register the forward-start hook on the first module",
    )


# ----------------------------------------------------------------------------- end-of-forward join


def _top_level_of(
    model: ModuleModel, fn: FunctionInfo
) -> tuple[FunctionInfo, cst.BaseStatement | None]:
    """The outermost function around `fn` and the module-level statement holding it."""
    outer = fn
    while outer.parent is not None:
        outer = outer.parent
    node: cst.CSTNode = outer.node if outer.cls is None else outer.cls.node
    return outer, next((s for s in model.module.body if s is node), None)


def _join_missing(model: ModuleModel, shape: OffloaderShape) -> str:
    if shape.offload is None:  # a tag left set by one capture would be trusted in the next
        return f"no method of {shape.cls.name} drops `self.{shape.tensors_attr}` after use"
    if not shape.wrap_arounds:
        return "no wrap-around prefetch to keep"
    if _top_level_of(model, shape.wrap_arounds[0].function)[1] is None:
        return "the wrap-around prefetch is not in a module-level function or class"
    return ""


def _plan_join(
    model: ModuleModel,
    shape: OffloaderShape,
    plan: StatementPlan,
    spelling: CaptureTestSpelling,
    missing: str,
) -> str:
    """Overlap without a forward-start hook (vLLM's shape): the wrap-around prefetch stays for
    eager forwards, the consumer waits only on a copy issued on its side of the capture boundary
    (else copies now), and an end-of-forward join the engine calls leaves no fork of a capture
    unjoined. Returns the note saying where the join must be called."""
    capturing = spelling.text
    event = f"self.{shape.event_attr}"
    tag = f"self.{shape.tag_attr}"
    _strip_capture_branches(
        shape, plan, "replaced by the capture tag of the load event and an end-of-forward join"
    )
    _plan_tagged_wait(
        shape,
        plan,
        capturing,
        "Issued on this side of any capture boundary (eagerly: maybe by the previous forward's\n"
        "# wrap-around prefetch): inside a capture this joins a fork of the same capture.",
        "Nothing pending on this side of any capture boundary (nothing prefetched, or the copy\n"
        "# was issued before this capture began or in a capture that has ended): copy now,\n"
        "# forked and joined in this call.",
    )

    for wrap in shape.wrap_arounds:
        ahead = model.module.code_for_node(wrap.ahead.with_changes(lpar=[], rpar=[]))
        bound = model.module.code_for_node(wrap.bound)
        new = statements(
            "# The wrap-around prefetch (for the next forward) runs only eagerly: inside a capture\n"
            "# it would be a second copy per replay that no replay uses (a captured forward copies\n"
            "# its first modules itself).\n"
            f"if (\n    {ahead} < {bound}\n    or not {capturing}\n):\n"
            f"    {_PLACEHOLDER}()\n"
        )
        new = _substitute(new, [wrap.line.with_changes(leading_lines=[])])
        plan.replace(
            wrap.line, None, ("OFL103", "OFL101"), "no wrap-around prefetch while capturing"
        )
        plan.insert_before(
            wrap.line, new, ("OFL103", "OFL101"), "keep the wrap-around prefetch for eager forwards"
        )

    method = _JOIN_METHOD if _JOIN_METHOD not in shape.cls.methods else f"_offlint_{_JOIN_METHOD}"
    local = "capturing"
    join = statements(
        f"def {method}(self) -> None:\n"
        "    # End-of-forward join (the engine calls it through the module-level helper after every\n"
        "    # forward). While capturing, join the copy this offloader still has pending from the\n"
        "    # capture (prefetched but not used), so that no fork is left unjoined when the capture\n"
        "    # ends. Eagerly there is nothing to join: a pending copy is waited on by the module\n"
        "    # that uses it, and an event last recorded in a capture is never waited on eagerly.\n"
        f"    {local} = {capturing}\n"
        f"    if {local} and {event} is not None and {tag}:\n"
        f"        {event}.wait()\n"
    )
    join[0] = join[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    plan.insert_after(
        shape.consumer.node, join, ("OFL103",), "add a capture-aware end-of-forward join"
    )

    wrap = shape.wrap_arounds[0]
    outer, top = _top_level_of(model, wrap.function)
    assert top is not None
    taken = set(model.module_functions) | {
        s.name.value for s in model.module.body if isinstance(s, cst.ClassDef | cst.FunctionDef)
    }
    helper = _JOIN_HELPER if _JOIN_HELPER not in taken else f"offlint_{_JOIN_HELPER}"
    sequence = model.module.code_for_node(wrap.sequence)
    param = sequence if sequence.isidentifier() else "offloaders"
    where = outer.qualname
    text = (
        f"def {helper}({param}) -> None:\n"
        '    """End-of-forward join of the offloaders given to\n'
        f"    `{where}`: call it at the end of every forward, inside the region\n"
        "    CUDA graphs capture, so that no copy forked in a capture is left unjoined when the\n"
        '    capture ends."""\n'
        f"    for offloader in {param}:\n"
        f"        offloader.{method}()\n"
    )
    helper_def = statements(text)
    helper_def[0] = helper_def[0].with_changes(
        leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]
    )
    plan.insert_after(top, helper_def, ("OFL103",), "add the end-of-forward join helper")
    return (
        f"{shape.cls.name}: no forward-start hook can be placed in this module ({missing}); the "
        "overlap strategy fell back to the end-of-forward join. The engine must call "
        f"`{helper}({param})` (added after `{where}` in this module) at the end of every forward, "
        f"with the list it passes to `{where}` as `{param}`: in the model's forward after the last "
        "layer ran and before it returns, inside the region CUDA graphs capture. For full overlap "
        f"inside graphs, issue the first `{shape.producer.name}` copies from a forward pre-hook "
        "on the model's first module instead and drop the wrap-around prefetch"
    )


# ----------------------------------------------------------------------------- inline


def _inline_missing(model: ModuleModel, shape: OffloaderShape) -> str:
    local = _local_names(shape.producer) & _free_names(shape.produce_value)
    if local:
        return f"the tensors stored by `{shape.producer.name}` depend on its locals ({', '.join(sorted(local))})"
    if _first_body_statement(shape.producer, shape.producer_capture_branches) is None:
        return f"`{shape.producer.name}` has no body to guard"
    return ""


def _fresh_local(fn: FunctionInfo, wanted: str) -> str:
    taken = _local_names(fn)
    name = wanted
    while name in taken:
        name = f"_{name}"
    return name


def _plan_inline(
    model: ModuleModel, shape: OffloaderShape, plan: StatementPlan, spelling: CaptureTestSpelling
) -> None:
    capturing = spelling.text
    tensors = f"self.{shape.tensors_attr}"
    event = f"self.{shape.event_attr}"
    _strip_capture_branches(
        shape, plan, "replaced by a capturing branch that keeps nothing made in the capture"
    )

    first = _first_body_statement(shape.producer, shape.producer_capture_branches)
    assert first is not None
    plan.insert_before(
        first,
        statements(
            f"if {capturing}:\n"
            "    # Inline under capture: the consumer copies where the tensors are used. A copy issued\n"
            "    # here as well would run twice per replay (the wrap-around prefetch at the graph's\n"
            "    # tail) and leave tensors made inside the capture on self.\n"
            f"    {tensors} = None\n"
            f"    {event} = None\n"
            "    return\n"
        ),
        ("OFL103", "OFL201"),
        "issue nothing while capturing",
    )
    local = _fresh_local(shape.consumer, "device_tensors")
    produce = model.module.code_for_node(shape.produce_value)
    consumer_first = _first_body_statement(shape.consumer, shape.consumer_capture_branches)
    assert consumer_first is not None
    plan.insert_before(
        consumer_first,
        statements(
            f"if {capturing}:\n"
            "    # Copy on the capture stream and wait on nothing: a pending prefetch recorded its\n"
            "    # event outside this capture. Not kept on self: these tensors hold garbage until a\n"
            "    # replay writes them, so eager code must never receive them.\n"
            f"    {local} = {produce}\n"
            f"    {tensors} = None\n"
            f"    {event} = None\n"
            f"    return {local}\n"
            f"if {tensors} is None:\n"
            "    # Nothing pending (the last prefetch was skipped while capturing): load now.\n"
            f"    self.{shape.producer.name}()\n"
        ),
        ("OFL101", "OFL201"),
        "copy inline while capturing, keep nothing made in the capture",
    )
