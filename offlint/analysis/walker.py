"""The walk of one function body, statement by statement: the capture context each statement runs
in (guards, early returns, flags derived from capture tests), the stream contexts and graph-capture
regions around it; it records the function's call sites, assignments and returns (`program.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import libcst as cst

from offlint.analysis.context import Context
from offlint.analysis.kinds import Kind
from offlint.analysis.program import Assignment, CallSite, FunctionInfo, ReturnSite, StreamScope
from offlint.analysis.syntax import (
    SCOPE_TYPES,
    child_nodes,
    operands,
    own_nodes,
)
from offlint.analysis.torch_api import (
    CAPTURE_TESTS,
    GRAPH_CONTEXTS,
    SEGMENTED_GRAPH_CONTEXTS,
    STREAM_CONTEXTS,
    STREAM_SWITCHES,
)

if TYPE_CHECKING:
    from offlint.analysis.model import ModuleModel


_TERMINATORS = (cst.Return, cst.Raise, cst.Continue, cst.Break)


def _terminates(block: cst.BaseSuite) -> bool:
    """True when a block always leaves (return/raise/continue/break as its last statement)."""
    if isinstance(block, cst.SimpleStatementSuite):
        return any(isinstance(s, _TERMINATORS) for s in block.body)
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return False
    last = block.body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, _TERMINATORS) for s in last.body)
    if isinstance(last, cst.If) and last.orelse is not None:
        other = last.orelse.body
        return _terminates(last.body) and (
            _terminates(other) if isinstance(other, cst.BaseSuite) else isinstance(other, cst.If) and _terminates_if(other)
        )
    return False


def _terminates_if(node: cst.If) -> bool:
    if node.orelse is None or not _terminates(node.body):
        return False
    other = node.orelse.body
    if isinstance(other, cst.If):
        return _terminates_if(other)
    return _terminates(other)


class BodyWalker:
    """Walks one function body statement by statement, tracking the capture context (guards,
    early returns), stream contexts and graph-capture regions, and records call sites,
    assignments and returns."""

    def __init__(self, model: ModuleModel, fn: FunctionInfo) -> None:
        self.model = model
        self.fn = fn
        self.order = 0
        self.scopes: list[StreamScope] = []
        self.graph_depth = 0
        self.sync_allowed_depth = 0
        self.guards: list[tuple[cst.BaseExpression, bool]] = []

    def walk(self) -> None:
        self.fn.training_tests = _training_only_tests(self.fn)
        self.block(self.fn.node.body, Context.UNKNOWN)

    def next_order(self) -> int:
        self.order += 1
        return self.order

    def block(self, suite: cst.BaseSuite, ctx: Context) -> Context:
        """Walk a block; returns the context that holds after it (for early returns)."""
        if isinstance(suite, cst.SimpleStatementSuite):
            for small in suite.body:
                self.small(small, suite, ctx)
            return ctx
        if not isinstance(suite, cst.IndentedBlock):
            return ctx
        capture_region_open = False
        early_exits = 0
        switched: StreamScope | None = None  # the stream `torch.cuda.set_stream(s)` made current
        for stmt in suite.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    switch = self._stream_switch(small)
                    if switch is not None:
                        self.small(small, stmt, ctx)
                        if switched is not None:
                            self.scopes.remove(switched)
                        switched = self._enter_stream(stmt, switch.args[0].value, switch, ctx)
                        continue
                    if self._is_capture_begin(small):
                        self.small(small, stmt, ctx)
                        self.graph_depth += 1
                        capture_region_open = True
                        continue
                    if self._is_capture_end(small) and capture_region_open:
                        self.graph_depth -= 1
                        capture_region_open = False
                    self.small(small, stmt, ctx)
                    if isinstance(small, cst.Assert):
                        # `assert not torch.cuda.is_current_stream_capturing()`: what follows is eager
                        ctx = self.model.branch_contexts(small.test, self.fn)[0] or ctx
            elif isinstance(stmt, cst.BaseCompoundStatement):
                ctx = self.compound(stmt, ctx)
                if capture_region_open and self._ends_capture_inside(stmt):
                    # `try: ... finally: g.capture_end()`: the region ends with the statement
                    self.graph_depth -= 1
                    capture_region_open = False
                if isinstance(stmt, cst.If) and stmt.orelse is None and _terminates(stmt.body):
                    # `if not tag: return`: the rest of the block runs only when the test failed
                    self.guards.append((stmt.test, False))
                    early_exits += 1
        if capture_region_open:
            self.graph_depth -= 1
        if switched is not None:
            self.scopes.remove(switched)
        del self.guards[len(self.guards) - early_exits :]
        return ctx

    def _enter_stream(
        self, node: cst.With | cst.SimpleStatementLine, stream: cst.BaseExpression, call: cst.Call | None, ctx: Context
    ) -> StreamScope:
        """Make `stream` current for what follows (a `with` body, or the rest of a block after
        `set_stream`); the caller leaves it."""
        scope = StreamScope(
            node=node,
            stream=stream,
            order=self.next_order(),
            call=call,
            context=Context.CAPTURING if self.graph_depth else ctx,
            guards=tuple(self.guards),
        )
        self.scopes.append(scope)
        self.fn.stream_withs.append(scope)
        return scope

    def _stream_switch(self, small: cst.BaseSmallStatement) -> cst.Call | None:
        """The `torch.cuda.set_stream(s)` call a statement is."""
        call = small.value if isinstance(small, cst.Expr) else None
        if isinstance(call, cst.Call) and call.args and self.model.qualname(call.func) in STREAM_SWITCHES:
            return call
        return None

    def _ends_capture_inside(self, stmt: cst.BaseCompoundStatement) -> bool:
        """A `capture_end()` statement somewhere in `stmt`'s blocks (a `finally:`, a branch)."""
        pending: list[cst.CSTNode] = [stmt]
        while pending:
            node = pending.pop()
            if isinstance(node, cst.SimpleStatementLine):
                if any(self._is_capture_end(small) for small in node.body):
                    return True
                continue
            if type(node) in SCOPE_TYPES:
                continue
            pending.extend(child_nodes(node))
        return False

    def _is_capture_begin(self, small: cst.BaseSmallStatement) -> bool:
        return self._method_call_name(small) == "capture_begin"

    def _is_capture_end(self, small: cst.BaseSmallStatement) -> bool:
        return self._method_call_name(small) == "capture_end"

    @staticmethod
    def _method_call_name(small: cst.BaseSmallStatement) -> str | None:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if isinstance(func, cst.Attribute):
                return func.attr.value
        return None

    def compound(self, stmt: cst.BaseCompoundStatement, ctx: Context) -> Context:
        if isinstance(stmt, cst.If):
            return self.if_statement(stmt, ctx)
        if isinstance(stmt, cst.With):
            return self.with_statement(stmt, ctx)
        if isinstance(stmt, cst.FunctionDef | cst.ClassDef):
            for decorator in stmt.decorators:
                self.expression(decorator.decorator, stmt, ctx)
            return ctx
        if isinstance(stmt, cst.For):
            self.expression(stmt.iter, stmt, ctx)
            self.block(stmt.body, ctx)
            if stmt.orelse is not None:
                self.block(stmt.orelse.body, ctx)
            return ctx
        if isinstance(stmt, cst.While):
            self.expression(stmt.test, stmt, ctx)
            self.guards.append((stmt.test, True))
            self.block(stmt.body, ctx)
            self.guards.pop()
            if stmt.orelse is not None:
                self.block(stmt.orelse.body, ctx)
            return ctx
        if isinstance(stmt, cst.Try | cst.TryStar):
            after = self.block(stmt.body, ctx)
            for handler in stmt.handlers:
                self.block(handler.body, ctx)
            if stmt.orelse is not None:
                after = self.block(stmt.orelse.body, after)
            if stmt.finalbody is not None:
                self.block(stmt.finalbody.body, ctx)
            return after
        if isinstance(stmt, cst.Match):
            self.expression(stmt.subject, stmt, ctx)
            for case in stmt.cases:
                if case.guard is not None:
                    self.expression(case.guard, stmt, ctx)
                self.block(case.body, ctx)
            return ctx
        # anything else: walk children blocks in the same context
        for child in child_nodes(stmt):
            if isinstance(child, cst.BaseSuite):
                self.block(child, ctx)
            elif isinstance(child, cst.BaseExpression):
                self.expression(child, stmt, ctx)
        return ctx

    def if_statement(self, stmt: cst.If, ctx: Context) -> Context:
        self.expression(stmt.test, stmt, ctx)
        decided_body, decided_else = self.model.branch_contexts(stmt.test, self.fn)
        decided = decided_body or decided_else
        if decided is not None:
            self.fn.tests_capture = True
        body_ctx = decided_body or ctx
        else_ctx = decided_else or ctx
        self.guards.append((stmt.test, True))
        body_after = self.block(stmt.body, body_ctx)
        self.guards[-1] = (stmt.test, False)
        if body_after is Context.EAGER and body_ctx is not Context.EAGER:
            # `if a or b: (if capturing: return) ...`: once through, a later `if b:` finds the
            # capture gone (it returned) - b implies eager from here on
            self.fn.eager_tests.extend(operands(stmt.test, cst.Or))
        else_terminates = False
        if stmt.orelse is not None:
            if isinstance(stmt.orelse, cst.If):
                self.if_statement(stmt.orelse, else_ctx)
                else_terminates = _terminates_if(stmt.orelse)
            else:
                self.block(stmt.orelse.body, else_ctx)
                else_terminates = _terminates(stmt.orelse.body)
        self.guards.pop()
        if decided is not None:
            if _terminates(stmt.body) and not else_terminates:
                return else_ctx  # `if capturing: return ...` - the rest is eager
            if else_terminates and not _terminates(stmt.body):
                return body_ctx
        return ctx

    def with_statement(self, stmt: cst.With, ctx: Context) -> Context:
        pushed = allows = 0
        graph = False
        for item in stmt.items:
            self.expression(item.item, stmt, ctx)
            opener = self._stream_context_call(item.item)
            held = None if opener is not None else self._stream_object(item.item)
            if opener is not None or held is not None:
                stream = opener.args[0].value if opener is not None else held
                assert stream is not None
                self._enter_stream(stmt, stream, opener, ctx)
                pushed += 1
            elif isinstance(item.item, cst.Call):
                q = self.model.qualname(item.item.func)
                if q in GRAPH_CONTEXTS:
                    graph = True
                elif _last_name(item.item.func) in SEGMENTED_GRAPH_CONTEXTS:
                    graph = self.model.segmented_capture = True
                elif _declares_syncs_allowed(item.item.func):
                    allows += 1
        if graph:
            self.graph_depth += 1
        self.sync_allowed_depth += allows
        body_ctx = Context.CAPTURING if graph else ctx
        after = self.block(stmt.body, body_ctx)
        self.sync_allowed_depth -= allows
        if graph:
            self.graph_depth -= 1
        for _ in range(pushed):
            self.scopes.pop()
        # a `with` body runs once: `if capturing: raise` inside it guards what follows the block
        return ctx if graph else after

    def _stream_object(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """`with self.stream:` - a stream object entered as its own context (`torch.Stream`,
        `torch.cuda.Stream` are context managers that make themselves current)."""
        if isinstance(expr, cst.Name | cst.Attribute | cst.Subscript):
            typed = self.model.kind_of(expr, self.fn)
            if typed.kind is Kind.STREAM and not typed.guessed:
                return expr
        return None

    def _stream_context_call(self, expr: cst.BaseExpression, depth: int = 0) -> cst.Call | None:
        """The `torch.cuda.stream(s)` call a `with` item enters: written there, one branch of a
        conditional whose other branch is not a stream context (`nullcontext() if s is None
        else torch.cuda.stream(s)`: on the path that switches, it switches to s), or the value a
        local name was last bound to before the `with` (`ctx = ...; with ctx:`)."""
        if isinstance(expr, cst.Call):
            if expr.args and self.model.qualname(expr.func) in STREAM_CONTEXTS:
                return expr
            return None
        if depth > 2:
            return None
        if isinstance(expr, cst.IfExp):
            body = self._stream_context_call(expr.body, depth + 1)
            orelse = self._stream_context_call(expr.orelse, depth + 1)
            return body if orelse is None else (orelse if body is None else None)
        if isinstance(expr, cst.Name):
            for assign in reversed(self.fn.assignments):
                if any(isinstance(t, cst.Name) and t.value == expr.value for t in assign.targets):
                    return self._stream_context_call(assign.value, depth + 1) if assign.value is not None else None
        return None

    def small(self, small: cst.BaseSmallStatement, stmt: cst.CSTNode, ctx: Context) -> None:
        if isinstance(small, cst.Assign | cst.AnnAssign | cst.AugAssign):
            if isinstance(small, cst.Assign):
                targets = tuple(t.target for t in small.targets)
            else:
                targets = (small.target,)
            self.fn.assignments.append(
                Assignment(
                    node=small,
                    targets=targets,
                    value=small.value,
                    function=self.fn,
                    context=ctx,
                    order=self.next_order(),
                    stream_scopes=tuple(self.scopes),
                )
            )
        elif isinstance(small, cst.Return):
            self.fn.returns.append(ReturnSite(node=small, function=self.fn, context=ctx, order=self.next_order()))
        self.expression(small, stmt, ctx)

    def expression(self, node: cst.CSTNode, stmt: cst.CSTNode, ctx: Context) -> None:
        """Record every call under `node` (not inside nested defs/lambdas), honouring
        `a if capturing else b`."""
        self.model._branch_memo.clear()  # what a test implies can change between statements
        stack: list[tuple[cst.CSTNode, Context]] = [(node, ctx)]
        found: list[tuple[cst.Call, Context]] = []
        while stack:
            current, current_ctx = stack.pop()
            current_type = type(current)
            if current_type in SCOPE_TYPES:
                continue
            if current_type is cst.BooleanOperation and isinstance(
                cast(cst.BooleanOperation, current).operator, cst.And
            ):
                # `a and b`: b runs only when a held (`not capturing and x.item()`)
                current = cast(cst.BooleanOperation, current)
                decided = self.model.branch_contexts(current.left, self.fn)[0]
                if decided is not None:
                    stack.append((current.right, decided))
                    stack.append((current.left, current_ctx))
                    continue
            if current_type is cst.IfExp:
                current = cast(cst.IfExp, current)
                decided_body, decided_else = self.model.branch_contexts(current.test, self.fn)
                if decided_body is not None or decided_else is not None:
                    self.fn.tests_capture = True
                    stack.append((current.orelse, decided_else or current_ctx))
                    stack.append((current.body, decided_body or current_ctx))
                    stack.append((current.test, current_ctx))
                    continue
            if current_type is cst.Call:
                current = cast(cst.Call, current)
                found.append((current, current_ctx))
                q = self.model.qualname(current.func)
                if q in CAPTURE_TESTS:
                    self.fn.tests_capture = True
            # pre-order, children in source order: close enough to evaluation order for the
            # rules' "before/after" questions
            stack.extend((child, current_ctx) for child in reversed(child_nodes(current)))
        self.model._branch_memo.clear()
        for call, call_ctx in found:
            self.record_call(call, stmt, call_ctx)

    def record_call(self, call: cst.Call, stmt: cst.CSTNode, ctx: Context) -> None:
        method = receiver = None
        if isinstance(call.func, cst.Attribute):
            method = call.func.attr.value
            receiver = call.func.value
        site = CallSite(
            node=call,
            function=self.fn,
            context=Context.CAPTURING if self.graph_depth else ctx,
            order=self.next_order(),
            callee=self.model.qualname(call.func),
            method=method,
            receiver=receiver,
            stream_scopes=tuple(self.scopes),
            in_graph_region=self.graph_depth > 0,
            statement=stmt,
            guards=tuple(self.guards),
            sync_allowed=self.sync_allowed_depth > 0,
        )
        self.fn.calls.append(site)
        if site.in_graph_region:
            self.model.graph_region_calls.append(site)


def _declares_syncs_allowed(func: cst.BaseExpression) -> bool:
    """`gpu_sync_allowed()`, `allow_host_sync()`: a project's own sync checker told that the
    syncs in the block are intended (vLLM's `gpu_sync_allowed` around host-tensor reads)."""
    name = (_last_name(func) or "").lower()
    return "sync" in name and ("allow" in name or "permit" in name)


def _training_only_tests(fn: FunctionInfo) -> list[cst.BaseExpression]:
    """The tests of the `if`s under which `fn` registers a gradient hook on a tensor
    (`query.register_hook(...)`): that raises for a tensor that does not require grad, so when the
    test holds the call runs with autograd recording - training, which the inference engines'
    graph captures (under `no_grad`/`inference_mode`) never take (DeepSpeed's Ulysses attention
    overlap). Found only in functions that make such a call."""
    hooks = fn.gradient_hooks
    if not hooks:
        return []
    tests: list[cst.BaseExpression] = []
    for node in own_nodes(fn.node.body):
        if isinstance(node, cst.If):
            inside = {id(n) for n in own_nodes(node.body)}
            if any(id(hook) in inside for hook in hooks):
                tests.append(node.test)
    return tests


def _last_name(expr: cst.BaseExpression) -> str | None:
    """`BreakableCUDAGraphCapture` for `bcg.BreakableCUDAGraphCapture` (the engines' own classes
    are imported from wherever each engine keeps them)."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else None
