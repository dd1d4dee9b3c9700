"""What the model of a module is made of: its classes and functions, and in each function the
calls, assignments, returns and stream contexts the walk (`walker.py`) records, each with the
capture context it runs in. `model.py` builds them; every rule reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from offlint.analysis.callgraph import Seed
from offlint.analysis.context import Context
from offlint.analysis.kinds import Typed
from offlint.diagnostics import Confidence


@dataclass(eq=False)
class StreamScope:
    """One `with torch.cuda.stream(expr):` around some code - also `with ctx:` where the
    function bound `ctx = torch.cuda.stream(expr)` (or `nullcontext() if ... else
    torch.cuda.stream(expr)`) before; and the statements after `torch.cuda.set_stream(s)` up to
    the next switch or the end of its block (`node` is then that statement)."""

    node: cst.With | cst.SimpleStatementLine
    stream: cst.BaseExpression
    order: int  # order index of the `with` statement in its function
    call: cst.Call | None = None  # the `torch.cuda.stream(expr)` call, where it is written
    context: Context = Context.UNKNOWN  # the capture context of the `with` statement
    # the tests of the `if`/`while`s around the `with` statement, with the branch taken
    guards: tuple[tuple[cst.BaseExpression, bool], ...] = ()


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    function: FunctionInfo
    context: Context
    order: int
    callee: str | None  # canonical qualified name when the callee resolves through imports
    method: str | None  # the attribute name for `x.method(...)`
    receiver: cst.BaseExpression | None
    stream_scopes: tuple[StreamScope, ...]
    in_graph_region: bool
    statement: cst.CSTNode  # the small statement (or compound header) holding the call
    # tests of the `if`/`while`/ternaries around the call, with the branch taken (True = body)
    guards: tuple[tuple[cst.BaseExpression, bool], ...] = ()
    # inside `with gpu_sync_allowed():`: the project declares the syncs there intended (OFL105)
    sync_allowed: bool = False

    @property
    def reachable(self) -> bool:
        return self.function.reachable

    @property
    def hazardous(self) -> bool:
        """May run during a capture: capture-reachable code, not guarded as eager."""
        if self.in_graph_region:
            return True
        if self.function.eager_break:  # runs between the segments of a segmented capture
            return False
        return self.function.reachable and self.context.may_capture


@dataclass(eq=False)
class Assignment:
    node: cst.CSTNode  # Assign / AnnAssign / AugAssign
    targets: tuple[cst.BaseExpression, ...]
    value: cst.BaseExpression | None
    function: FunctionInfo
    context: Context
    order: int
    stream_scopes: tuple[StreamScope, ...]


@dataclass(eq=False)
class ReturnSite:
    node: cst.Return
    function: FunctionInfo
    context: Context
    order: int


@dataclass(eq=False)
class ClassInfo:
    node: cst.ClassDef
    name: str
    bases: tuple[str, ...]
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    autograd_function: bool = False  # a torch.autograd.Function subclass (set by reachability)
    # `self.X = value` stores by X, built on first use (`attribute_stores`)
    attr_stores: dict[str, list[tuple[FunctionInfo, cst.BaseExpression | None]]] | None = None
    attrs: dict[str, Typed] = field(default_factory=dict)
    attr_elements: dict[str, Typed] = field(default_factory=dict)
    method_returns: dict[str, Typed] = field(default_factory=dict)  # what `self.m(...)` gives, by m
    capture_flags: set[str] = field(default_factory=set)  # self.X assigned from a capture test
    offloader_style: bool = False
    offloader_evidence: str = ""
    # a function other than `__init__` returns a fresh instance (`return _Pending(...)`): its
    # instances may live for one call, so "set once per instance" is not "set once"
    made_per_call: bool = False

    @property
    def is_nn_module(self) -> bool:
        return any(b == "Module" or b.endswith(".Module") for b in self.bases)


@dataclass(eq=False)
class FunctionInfo:
    node: cst.FunctionDef
    qualname: str
    cls: ClassInfo | None
    parent: FunctionInfo | None
    calls: list[CallSite] = field(default_factory=list)
    assignments: list[Assignment] = field(default_factory=list)
    returns: list[ReturnSite] = field(default_factory=list)
    stream_withs: list[StreamScope] = field(default_factory=list)
    locals: dict[str, Typed] = field(default_factory=dict)
    local_elements: dict[str, Typed] = field(default_factory=dict)
    capture_flags: set[str] = field(default_factory=set)  # locals assigned from a capture test
    eager_flags: set[str] = field(default_factory=set)  # locals assigned `not <capture test>`
    # tests that, from where they were seen on, imply no capture is under way (model walk order)
    eager_tests: list[cst.BaseExpression] = field(default_factory=list)
    gradient_hooks: list[cst.Call] = field(default_factory=list)  # its `t.register_hook(...)` calls
    # tests under which it registers tensor gradient hooks: training only (`_training_only_tests`)
    training_tests: list[cst.BaseExpression] = field(default_factory=list)
    nonlocals: set[str] = field(default_factory=set)  # names it declares `nonlocal`
    global_names: set[str] = field(default_factory=set)  # names it declares `global`
    tests_capture: bool = False
    is_capture_predicate: bool = False  # `def is_capturing(): return torch.cuda.is_...()`
    reachable: bool = False
    confidence: Confidence | None = None  # how capture reaches it (reachability.py); None: not
    reachable_reason: str = ""
    reachable_via: FunctionInfo | None = None  # the reachable function this one was reached from
    entry_context: Context = Context.UNKNOWN
    eager_break: bool = False  # runs eagerly between the segments of a segmented capture
    drives_capture: bool = False  # holds a capture region: it runs around the capture, not in it
    binding_nodes: list[cst.CSTNode] | None = None  # Assign/AnnAssign/With/Call of its own body
    handed_down: dict[str, Typed] = field(default_factory=dict)  # parameter kinds its callers give
    # what its same-module callers pass a handed-down parameter, and where (facts.stream_role)
    handed_args: dict[str, list[tuple[cst.BaseExpression, FunctionInfo]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name.value

    @property
    def is_method(self) -> bool:
        return self.cls is not None and self.parent is None


@dataclass
class ModelOptions:
    # extra capture-reachable functions: fnmatch patterns over `Class.method` or bare names
    capture_reachable: Sequence[str] = ()
    # functions other modules of the checked tree reach (callgraph.py)
    seeds: Sequence[Seed] = ()
    # (function, receiver source, kind value): the semantic core's objects for receivers
    hints: Sequence[tuple[str, str, str]] = ()
    # the checked tree captures in segments (a module of it does, `segmented_capture`): an event
    # fork joined in a later call may meet a segment's end first (callgraph.py)
    segmented_capture: bool = False
