"""Which functions may run while a CUDA graph is being captured, how sure that is, and why.

shared/CATALOGUE.md defines three tiers, and every reachable function carries the highest one any
path gives it:

- high: called (transitively) from a capture region (`torch.cuda.graph(...)`, segmented
  `BreakableCUDAGraphCapture(...)`, `capture_begin()`…`capture_end()`,
  `make_graphed_callables(...)`), code that branches on the capture state to do capture work,
  functions named by configuration, and functions another module of the checked tree reaches
  that way (`Seed`s from the project call graph, `callgraph.py`);
- medium: the forward path of offloader-style code whose capture lives outside the tree:
  `forward` of nn.Module-like classes that hold streams or events or order streams (never a
  driver: `*Runner`, `*Scheduler`, ...), hooks and wrapped forwards such code installs, the
  callables it hands to them, model-hook protocols (`pre_forward`/`post_forward` of `*Hook`
  classes), eager breaks of a segmented capture, and what all of those call;
- low: any other method of an offloader-style class (schedulers, allocators, timers and loaders
  hold streams too: their methods are reported only on request).

Never reachable: constructors and teardown, what only they (or only unreachable code) call, and
capture drivers (a function holding a capture region runs around it). Reachability flows along
same-module calls made where capture is possible: a call under an `if not capturing:` guard, or
only when CUDA graphs are configured off, carries nothing. What an eager break calls runs between
segments too (`eager_break`: host syncs are legal there, unjoined forks are not).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import TYPE_CHECKING

import libcst as cst

from offlint.analysis.callgraph import Seed
from offlint.analysis.context import Context
from offlint.analysis.imports import dotted_name
from offlint.analysis.kinds import Kind, self_attribute
from offlint.analysis.syntax import call_argument, child_nodes, operands, parameter_names, walk
from offlint.analysis.torch_api import (
    BACKWARD_HOOK_REGISTRARS,
    CAPTURE_TESTS,
    EAGER_BREAK_DECORATORS,
    GRAPHED_CALLABLES,
    HOOK_REGISTRARS,
    MODEL_HOOK_METHODS,
)
from offlint.diagnostics import Confidence

if TYPE_CHECKING:  # the model calls mark_reachable once it is built
    from offlint.analysis.model import ModuleModel
    from offlint.analysis.program import CallSite, ClassInfo, FunctionInfo

HIGH, MEDIUM, LOW = Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW
# a plain class's `__call__` is no forward path: graph runners and loaders are called too
_FORWARD_NAMES = ("forward",)


def mark_reachable(model: ModuleModel, patterns: Iterable[str] = (), seeds: Iterable[Seed] = ()) -> None:
    """Set `reachable`, `confidence`, `reachable_reason`, `reachable_via` and `eager_break` on
    every function of `model`."""
    _Marker(model).run(tuple(patterns), tuple(seeds))


class _Marker:
    def __init__(self, model: ModuleModel) -> None:
        self.model = model
        self.queue: list[FunctionInfo] = []
        self.methods_by_name: dict[str, list[FunctionInfo]] | None = None
        self.decorated_breaks: set[int] = set()

    def mark(
        self,
        fn: FunctionInfo,
        confidence: Confidence,
        reason: str,
        *,
        entry: Context = Context.UNKNOWN,
        via: FunctionInfo | None = None,
        eager: bool = False,
    ) -> None:
        """Raise `fn` to `confidence` (never lower it); queue it when that changed anything.
        `eager`: reached from an eager break of a segmented capture, so it runs between segments."""
        if fn.drives_capture and not reason.startswith("named by configuration"):
            return  # the capture driver itself runs outside the capture it drives
        if fn.confidence is not None and fn.confidence.rank >= confidence.rank:
            return
        fn.reachable = True
        fn.confidence = confidence
        fn.reachable_reason = reason
        fn.eager_break = eager or id(fn) in self.decorated_breaks
        fn.reachable_via = via
        if entry is not Context.UNKNOWN or fn.entry_context is Context.UNKNOWN:
            fn.entry_context = entry
        self.queue.append(fn)

    def run(self, patterns: tuple[str, ...], seeds: tuple[Seed, ...]) -> None:
        model = self.model
        for holder in model.classes:
            holder.autograd_function = _is_autograd_function(model, holder)
        offloader_module = any(cls.offloader_style for cls in model.classes)
        drivers = {id(call.function) for call in model.graph_region_calls} | _callers_of_capture_helpers(model)
        for fn in model.functions:
            if id(fn) in drivers:
                # it drives a capture: what it runs inside the region is reached from there (high);
                # its own set-up around the region (warm-up, synchronize, allocation) never is
                fn.drives_capture = True
            if patterns and any(
                fnmatch.fnmatchcase(fn.qualname, p) or fnmatch.fnmatchcase(fn.name, p) for p in patterns
            ):
                self.mark(fn, HIGH, "named by configuration (capture-reachable)")
            if fn.tests_capture:
                if _does_capture_work(fn):
                    self.mark(fn, HIGH, "tests is_current_stream_capturing()")
                elif _asks_capture_state(fn) and not _refuses_capture(fn):
                    # a guard proves its author runs this code under capture: what the guard
                    # leaves unprotected (and what it calls there) is captured too
                    self.mark(fn, MEDIUM, GUARD_REASON)
            if _is_eager_break(model, fn):
                self.decorated_breaks.add(id(fn))
                self.mark(fn, MEDIUM, "an eager break of a segmented CUDA graph capture (runs between segments)")
        for wrapped in _wrapped_as_eager_breaks(model):
            self.decorated_breaks.add(id(wrapped))
            self.mark(wrapped, MEDIUM, "an eager break of a segmented CUDA graph capture (runs between segments)")
        for call in model.graph_region_calls:
            targets, guessed = self._called_or_candidates(call)
            for target in targets:
                self.mark(target, HIGH, f"called inside a CUDA graph capture region{guessed}", entry=Context.CAPTURING)
        for call in model.all_calls():
            if call.callee in GRAPHED_CALLABLES:
                for arg in call.node.args[:1]:
                    values = [e.value for e in arg.value.elements] if isinstance(arg.value, cst.Tuple | cst.List) else [arg.value]
                    for value in values:
                        graphed = model._function_named(value, call.function) or _forward_of_module_value(
                            model, value, call.function
                        )
                        if graphed is not None:
                            self.mark(graphed, HIGH, "graphed by make_graphed_callables", entry=Context.CAPTURING)
            if offloader_module:
                self._installed_hook(call, MEDIUM)
        by_name = {cls.name: cls for cls in model.classes}
        for holder in model.classes:
            if holder.offloader_style and _module_like(holder, by_name):
                style = f"offloader-style class {holder.name}: {holder.offloader_evidence}"
                for name in _FORWARD_NAMES:
                    forward = self.model.method_of(holder, name)
                    if forward is not None:
                        self.mark(forward, MEDIUM, f"forward path of {style}")
        if offloader_module:
            for fn in model.functions:
                for assign in fn.assignments:
                    self._installed_forward(assign.targets, assign.value, fn, MEDIUM)
            # a pass-through autograd Function (its forward returns an input unchanged) is a hook
            # by another name, run inside the forward of the model that applies it (Megatron's
            # activation-offload group commit); one that computes (a loss, an attention) is a layer
            # of its own, reached only as its callers are
            for holder in model.classes:
                forward = holder.methods.get("forward")
                if forward is not None and holder.autograd_function and _passes_through(forward):
                    self.mark(forward, MEDIUM, f"forward of autograd Function {holder.name} (runs in the model's forward)")
        for holder in model.classes:
            if is_hook_class(holder, by_name):
                for name in _HOOK_METHODS:
                    method = self.model.method_of(holder, name)
                    if method is not None:
                        self.mark(method, MEDIUM, f"{HOOK_REASON} {holder.name}.{name} runs inside the hooked module's forward")
        for fn in model.functions:
            cls = fn.cls
            if cls is not None and cls.offloader_style and fn.parent is None and not _is_lifecycle_dunder(fn.name):
                self.mark(fn, LOW, f"method of offloader-style class {cls.name}: {cls.offloader_evidence}")
        # what other modules (or the whole tree's semantic core) reach: after this module's own
        # entries, so a function that both reach keeps the nearer reason, and never a driver
        by_qualname = {fn.qualname: fn for fn in model.functions}
        for seed in seeds:
            seeded = by_qualname.get(seed.qualname)
            if seeded is not None:
                self.mark(seeded, seed.confidence, seed.reason)
        self._propagate()

    def _propagate(self) -> None:
        model = self.model
        nested: dict[int, list[FunctionInfo]] = {}
        for fn in model.functions:
            if fn.parent is not None:
                nested.setdefault(id(fn.parent), []).append(fn)
        while self.queue:
            fn = self.queue.pop()
            confidence = fn.confidence
            assert confidence is not None
            # a capture guard is evidence for its own function and what that calls directly;
            # deeper callees (behind the flags and data those pass on) are only plausible
            callee_confidence = confidence
            if fn.reachable_via is not None and reach_root(fn).reachable_reason == GUARD_REASON:
                callee_confidence = LOW
            for call in fn.calls:
                self._installed_hook(call, MEDIUM if confidence is LOW else confidence)
                if not call.context.may_capture or only_without_graphs(call):
                    continue
                fallback = capture_fallback(model, call.guards, fn)
                targets, guessed = self._called_or_candidates(call) if confidence is not LOW else (self._called(call), "")
                for target in targets:
                    self.mark(
                        target,
                        LOW if fallback is not None else callee_confidence,
                        f"called from capture-reachable {fn.qualname}{guessed}",
                        via=fn,
                        eager=fn.eager_break,
                    )
            for assign in fn.assignments:
                self._installed_forward(assign.targets, assign.value, fn, MEDIUM if confidence is LOW else confidence)
            returned = {r.node.value.value for r in fn.returns if isinstance(r.node.value, cst.Name)}
            for inner in nested.get(id(fn), ()):
                if inner.name in returned:
                    continue  # a factory's product runs where it is installed, not here
                self.mark(inner, confidence, f"defined inside capture-reachable {fn.qualname}", via=fn, eager=fn.eager_break)

    def _called(self, call: CallSite) -> list[FunctionInfo]:
        """Same-module functions a call runs: `f()`, `self.m()`, and a same-module nn.Module's
        `forward` for `Block(...)(x)` or `block(x)` where `block = Block(...)` in that function."""
        target = self.model._called_function(call.node, call.function) or self._only_method(call)
        if target is not None:
            return [] if _is_lifecycle_dunder(target.name) else [target]
        forward = _forward_of_instance(self.model, call) or _forward_of_apply(self.model, call)
        if forward is not None:
            return [forward]
        return self._passed_callables(call)

    def _called_or_candidates(self, call: CallSite) -> tuple[list[FunctionInfo], str]:
        """What a call runs, and where the receiver's type is unknown (`prefetcher.get()` on an
        unannotated parameter), the methods of that name that this module's offloader-style
        classes define, with a note naming them: any of them may be the one called."""
        found = self._called(call)
        if found:
            return found, ""
        candidates = self._receiver_candidates(call)
        if not candidates:
            return [], ""
        named = ", ".join(sorted(c.qualname for c in candidates))
        return candidates, f" (receiver of unknown type: {named})"

    def _receiver_candidates(self, call: CallSite) -> list[FunctionInfo]:
        receiver, name = call.receiver, call.method
        if (
            name is None
            or name.startswith("__")
            or name in _TORCH_OBJECT_METHODS
            or not isinstance(receiver, cst.Name)
            or receiver.value in ("self", "cls")
            or self.model.kind_of(receiver, call.function).kind is not Kind.UNKNOWN
            or self.model.resolver.bindings.get(receiver.value) is not None  # a module or an import
        ):
            return []
        return [
            method
            for cls in self.model.classes
            if cls.offloader_style
            and (method := cls.methods.get(name)) is not None
            and not _is_lifecycle_dunder(method.name)
        ]

    def _passed_callables(self, call: CallSite) -> list[FunctionInfo]:
        """`on_end()` where `on_end` is a parameter: the same-module functions (and the calls of
        lambdas) that callers pass for it, as SGLang's offloader hands its hooks to the forward
        it installs."""
        func = call.node.func
        if not isinstance(func, cst.Name):
            return []
        owner: FunctionInfo | None = call.function
        while owner is not None and func.value not in parameter_names(owner.node.params):
            owner = owner.parent
        if owner is None:
            return []
        found: list[FunctionInfo] = []
        for site in self.model.callers_of(owner):
            bound = owner.is_method and isinstance(site.node.func, cst.Attribute)
            arg = call_argument(site.node, owner.node.params, func.value, bound)
            if arg is None:
                continue
            if isinstance(arg, cst.Lambda):
                for node in walk(arg.body):
                    if isinstance(node, cst.Call):
                        inner = self.model._called_function(node, site.function) or self._only_method_named(node)
                        if inner is not None:
                            found.append(inner)
                continue
            passed = self.model._function_named(arg, site.function)
            if passed is not None:
                found.append(passed)
        return found

    def _only_method_named(self, node: cst.Call) -> FunctionInfo | None:
        if not isinstance(node.func, cst.Attribute):
            return None
        return self._method_by_name(node.func.attr.value)

    def _only_method(self, call: CallSite) -> FunctionInfo | None:
        """`self.group.onload_()`: the one method of this module's classes with that name, when
        exactly one class defines it and the name is not one every object has."""
        return self._method_by_name(call.method)

    def _method_by_name(self, name: str | None) -> FunctionInfo | None:
        if name is None or name in _COMMON_METHOD_NAMES or name.startswith("__"):
            return None
        if self.methods_by_name is None:
            self.methods_by_name = {}
            for cls in self.model.classes:
                for method_name, method in cls.methods.items():
                    self.methods_by_name.setdefault(method_name, []).append(method)
        found = self.methods_by_name.get(name, [])
        return found[0] if len(found) == 1 else None

    def _installed_hook(self, call: CallSite, confidence: Confidence) -> None:
        """`m.register_forward_pre_hook(fn)`: fn runs inside every forward of m."""
        if call.method not in HOOK_REGISTRARS or not call.node.args or only_without_graphs(call):
            return
        hook = call.node.args[0].value
        if (
            isinstance(hook, cst.Call)
            and hook.args
            and isinstance(hook.args[0].value, cst.Lambda)
            and (self.model.qualname(hook.func) or dotted_name(hook.func)) in ("partial", "functools.partial")
        ):
            hook = hook.args[0].value  # `functools.partial(lambda i, m, a: ..., i)`
        if isinstance(hook, cst.Lambda):
            # `register_forward_pre_hook(lambda m, a: _await(slot))`: the lambda's calls run as the hook
            targets = [
                found
                for node in walk(hook.body)
                if isinstance(node, cst.Call)
                and (found := self.model._called_function(node, call.function) or self._only_method_named(node)) is not None
            ]
        else:
            target = self.model._function_named(hook, call.function)
            targets = [target] if target is not None else []
        if call.method in BACKWARD_HOOK_REGISTRARS:
            confidence = LOW  # runs in backward: only a training step's capture reaches it
        for target in targets:
            self.mark(target, confidence, f"installed as a hook by {call.function.qualname}")

    def _installed_forward(
        self, targets: tuple[cst.BaseExpression, ...], value: cst.BaseExpression | None, fn: FunctionInfo, confidence: Confidence
    ) -> None:
        """`module.forward = wrapped`: wrapped runs as the forward."""
        if value is None:
            return
        for target_expr in targets:
            if isinstance(target_expr, cst.Attribute) and target_expr.attr.value == "forward":
                target = self.model._function_named(value, fn)
                if target is not None:
                    self.mark(target, confidence, f"installed as a wrapped forward by {fn.qualname}")


_CAPTURE_METHODS = frozenset({"capture_begin", "capture_end"})


def _callers_of_capture_helpers(model: ModuleModel) -> set[int]:
    """Functions that open or close a capture through a same-module helper
    (`def _begin(g, pool): g.capture_begin(pool=pool)`): capture drivers like those that call
    `capture_begin()` themselves, though their region is not visible statement by statement."""
    helpers = {id(fn) for fn in model.functions if any(call.method in _CAPTURE_METHODS for call in fn.calls)}
    if not helpers:
        return set()
    found: set[int] = set()
    for fn in model.functions:
        for call in fn.calls:
            target = model._called_function(call.node, fn)
            if target is not None and id(target) in helpers and target is not fn:
                found.add(id(fn))
                break
    return found


def _is_lifecycle_dunder(name: str) -> bool:
    # construction and teardown do not run under capture; __call__ does
    return name.startswith("__") and name.endswith("__") and name != "__call__"


# configuration flags that switch CUDA graphs on (`enable_cuda_graph`, `use_cudagraph`) or off
# (`enforce_eager`, `disable_cuda_graph`), by the words in their names
_GRAPHS_ON_WORDS = ("cuda_graph", "cudagraph")
_GRAPHS_OFF_WORDS = ("enforce_eager", "disable_cuda_graph", "disable_cudagraph")


def run_after_capture_by_driver(model: ModuleModel, fn: FunctionInfo) -> bool:
    """`fn` is reached only at the lowest tier and a capture driver calls it outside its capture
    region (`g.replay(); return h.consume(y)`): it runs eagerly, after a capture."""
    if fn.confidence is not LOW:
        return False
    return any(site.function.drives_capture and not site.in_graph_region for site in model.callers_of(fn))


def only_without_graphs(call: CallSite) -> bool:
    """The call runs only when the configuration turns CUDA graphs off: under
    `if not cfg.enable_cuda_graph:` (a conjunct of it) or `if cfg.enforce_eager:` (DeepSpeed's
    profiling hooks, vLLM's eager-only paths), so no capture reaches it through here."""
    for test, taken in call.guards:
        for conjunct in operands(test, cst.And) if taken else ():
            negated = isinstance(conjunct, cst.UnaryOperation) and isinstance(conjunct.operator, cst.Not)
            inner = conjunct.expression if isinstance(conjunct, cst.UnaryOperation) and negated else conjunct
            name = (dotted_name(inner) or "").lower()
            if negated and any(w in name for w in _GRAPHS_ON_WORDS) and not any(w in name for w in _GRAPHS_OFF_WORDS):
                return True
            if not negated and any(w in name for w in _GRAPHS_OFF_WORDS):
                return True
    return False


def capture_fallback(
    model: ModuleModel, guards: tuple[tuple[cst.BaseExpression, bool], ...], fn: FunctionInfo
) -> cst.BaseExpression | None:
    """The condition that must fail for code to run while capturing when it is the fall-back of a
    capture branch: the else of, or the code after an early return from, `if <cond> and
    <capture test>:`. The author handles capture in that branch; what is left runs in a capture
    only where `<cond>` (a feature probe, a configuration flag, a batch-size test) fails there,
    so it is reported on request (low), not as code capture reaches. None otherwise."""
    for test, taken in guards:
        if taken or not (isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And)):
            continue
        decided = [(c, model.capture_condition(c, fn)) for c in operands(test, cst.And)]
        if not any(context is Context.CAPTURING for _, context in decided):
            continue
        others = [c for c, context in decided if context is None and not model.implied_by_capture(c)]
        if others:
            return others[0]
    return None


def _does_capture_work(fn: FunctionInfo) -> bool:
    """The catalogue's "branches on the capture state to do capture work": something runs only
    while capturing. A test that only returns, raises or skips when capturing is a guard."""
    if any(a.context is Context.CAPTURING and _computes(a.value) for a in fn.assignments):
        return True  # `y = x * 2` / `buf = torch.empty(...)` while capturing; not `skip = False`
    return any(
        call.context is Context.CAPTURING and not call.in_graph_region and not _raises(call.statement)
        for call in fn.calls
    )


def _asks_capture_state(fn: FunctionInfo) -> bool:
    """`fn` itself asks the stream whether it is capturing (`torch.cuda.is_current_stream_capturing()`).
    Not a placement test (`t.device.type == "cpu"`), a flag handed in, nor an engine's capture-mode
    predicate (SGLang's `get_is_capture_mode()` also holds in the eager breaks of a segmented
    capture, where host syncs are legal)."""
    return any(call.callee in CAPTURE_TESTS for call in fn.calls)


def _refuses_capture(fn: FunctionInfo) -> bool:
    """`if capturing: raise ...`: the author says this never runs in a capture (start-up set-up,
    an eager-only path), so its test is no sign that it does."""
    return any(call.context is Context.CAPTURING and _raises(call.statement) for call in fn.calls)


def _computes(value: cst.BaseExpression | None) -> bool:
    """Not a constant flag: `True`, `None`, `0`, `"x"`, or a plain name."""
    return value is not None and not isinstance(
        value, cst.Name | cst.Integer | cst.Float | cst.SimpleString | cst.Attribute
    )


def _raises(statement: cst.CSTNode) -> bool:
    if isinstance(statement, cst.SimpleStatementLine):
        return any(isinstance(small, cst.Raise) for small in statement.body)
    return isinstance(statement, cst.Raise)


GUARD_REASON = "tests is_current_stream_capturing() to skip work while capturing"
# model-hook protocols (diffusers' and accelerate's ModelHook, vllm-omni's, fastvideo's ForwardHook):
# the installed forward calls these around the module's own forward
_HOOK_METHODS = MODEL_HOOK_METHODS
HOOK_REASON = "a forward hook:"
# methods of torch's own streams, events and tensors: `x.wait()` on an unknown `x` is an event's
_TORCH_OBJECT_METHODS = frozenset(
    {"wait", "record", "synchronize", "query", "wait_stream", "wait_event", "record_event", "record_stream"}
    | {"copy_", "to", "cuda", "cpu", "item", "tolist", "numpy", "pin_memory", "elapsed_time", "view", "reshape"}
)
# names too common to resolve a call `x.name()` by name alone
_COMMON_METHOD_NAMES = frozenset(
    {"forward", "run", "step", "update", "get", "set", "apply", "reset", "close", "start", "stop", "wait",
     "record", "synchronize", "query", "copy_", "to", "cuda", "cpu", "item", "tolist", "append", "pop"}
)


def is_hook_class(cls: ClassInfo, by_name: dict[str, ClassInfo], depth: int = 0) -> bool:
    if cls.name.endswith("Hook") or any(b.rsplit(".", 1)[-1].endswith("Hook") for b in cls.bases):
        return True
    return any(
        (local := by_name.get(b)) is not None and local is not cls and depth < 8 and is_hook_class(local, by_name, depth + 1)
        for b in cls.bases
    )


# classes whose `forward` drives models rather than being one (graph runners, schedulers, workers)
_DRIVER_SUFFIXES = ("Runner", "Scheduler", "Worker", "Engine", "Manager", "Executor", "Node")
_NOT_MODULE_BASES = frozenset({"object", "ABC", "Protocol", "Generic", "Enum", "NamedTuple"})


def _is_autograd_function(model: ModuleModel, cls: ClassInfo) -> bool:
    for base in cls.bases:
        head, _, rest = base.partition(".")
        bound = model.resolver.bindings.get(head)
        if bound is not None and (f"{bound}.{rest}" if rest else bound) == "torch.autograd.Function":
            return True
    return False


def _passes_through(forward: FunctionInfo) -> bool:
    params = set(parameter_names(forward.node.params))
    returned = [r.node.value for r in forward.returns]
    return bool(returned) and all(isinstance(v, cst.Name) and v.value in params for v in returned)


def _module_like(cls: ClassInfo, by_name: dict[str, ClassInfo], depth: int = 0) -> bool:
    """An nn.Module, or a class deriving from one through bases this module cannot see (model
    code subclasses its framework's layers); never a driver class."""
    if cls.name.endswith(_DRIVER_SUFFIXES) or cls.autograd_function:
        return False  # an autograd Function runs where a caller `.apply`s it (`_called`)
    if cls.is_nn_module:
        return True
    for base in cls.bases:
        last = base.rsplit(".", 1)[-1]
        local = by_name.get(base)
        if local is not None and local is not cls and depth < 8:
            if _module_like(local, by_name, depth + 1):
                return True
        elif last not in _NOT_MODULE_BASES and not last.endswith("Mixin") and "[" not in base:
            return True
    return False


def _is_eager_break(model: ModuleModel, fn: FunctionInfo) -> bool:
    """`@eager_on_graph`, `@eager_on_graph(True)`, `@eager_break_during_capture`: SGLang's and
    vLLM's segmented capture run the function eagerly between two captured segments."""
    for decorator in fn.node.decorators:
        expr = decorator.decorator
        if isinstance(expr, cst.Call):
            expr = expr.func
        name = model.qualname(expr) or dotted_name(expr) or ""
        if name.rsplit(".", 1)[-1] in EAGER_BREAK_DECORATORS:
            return True
    return False


def _wrapped_as_eager_breaks(model: ModuleModel) -> list[FunctionInfo]:
    """`bcg_f = eager_on_graph(True, capture_stub=stub)(f)` at module level: f is an eager break."""
    found: list[FunctionInfo] = []
    for stmt in model.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            value = small.value if isinstance(small, cst.Assign) else None
            if not isinstance(value, cst.Call) or not value.args:
                continue
            maker = value.func.func if isinstance(value.func, cst.Call) else value.func
            name = model.qualname(maker) or dotted_name(maker) or ""
            if name.rsplit(".", 1)[-1] not in EAGER_BREAK_DECORATORS:
                continue
            target = value.args[-1].value if isinstance(value.func, cst.Call) else value.args[0].value
            if isinstance(target, cst.Name) and target.value in model.module_functions:
                found.append(model.module_functions[target.value])
    return found


def _forward_of_instance(model: ModuleModel, call: CallSite) -> FunctionInfo | None:
    """The `forward` of a same-module nn.Module class that a call invokes: `Block(...)(x)`, or
    `block(x)` where the calling function assigned `block = Block(...)`."""
    func = call.node.func
    made: cst.BaseExpression | None = func if isinstance(func, cst.Call) else None
    if made is None and isinstance(func, cst.Name):
        for assign in call.function.assignments:
            if (
                assign.order < call.order
                and isinstance(assign.value, cst.Call)
                and any(isinstance(t, cst.Name) and t.value == func.value for t in assign.targets)
            ):
                made = assign.value
    if made is None and isinstance(func, cst.Name):
        # `block(x)` where `block: Block` is a parameter (or a local made from `Block(...)`)
        local = model._class_of_local(func.value, call.function)
        if local is not None and local.is_nn_module:
            return model.method_of(local, "forward")
    held = self_attribute(func)
    if made is None and held is not None and call.function.cls is not None:
        # `self.model(x)` where `self.model` holds a same-module nn.Module (`model: DecodeStep`)
        owner = model.class_of_attribute(call.function.cls, held)
        return model.method_of(owner, "forward") if owner is not None and owner.is_nn_module else None
    if not isinstance(made, cst.Call) or not isinstance(made.func, cst.Name):
        return None
    for cls in model.classes:
        if cls.name == made.func.value and cls.is_nn_module:
            return model.method_of(cls, "forward")
    return None


# module methods that return the module itself (`Block(...).cuda().eval()`)
_RETURNS_MODULE = frozenset({"cuda", "to", "eval", "train", "half", "float", "bfloat16", "requires_grad_"})


def _forward_of_module_value(model: ModuleModel, expr: cst.BaseExpression, fn: FunctionInfo) -> FunctionInfo | None:
    """The `forward` of the same-module nn.Module instance `expr` holds: `Block(...)`,
    `Block(...).cuda()`, or a local assigned one of those in `fn`."""
    for _ in range(4):
        if isinstance(expr, cst.Name):
            bound = [a.value for a in fn.assignments if any(isinstance(t, cst.Name) and t.value == expr.value for t in a.targets)]
            if len(bound) != 1 or bound[0] is None:
                return None
            expr = bound[0]
            continue
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _RETURNS_MODULE:
            expr = expr.func.value
            continue
        break
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name)):
        return None
    cls = model._classes_named().get(expr.func.value)
    return model.method_of(cls, "forward") if cls is not None and cls.is_nn_module else None


def _forward_of_apply(model: ModuleModel, call: CallSite) -> FunctionInfo | None:
    """`Fn.apply(...)` of a same-module autograd Function runs its `forward`."""
    func = call.node.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "apply" and isinstance(func.value, cst.Name)):
        return None
    for cls in model.classes:
        if cls.name == func.value.value and cls.autograd_function:
            return cls.methods.get("forward")
    return None


def reach_root(fn: FunctionInfo) -> FunctionInfo:
    """Where `fn`'s chain of callers (`reachable_via`) starts."""
    root, seen = fn, {id(fn)}
    while root.reachable_via is not None and id(root.reachable_via) not in seen:
        root = root.reachable_via
        seen.add(id(root))
    return root


def function_of(model: ModuleModel, node: cst.CSTNode) -> FunctionInfo | None:
    """The innermost function whose body holds `node` (None at module level)."""
    index = model.function_index
    if index is None:
        index = {}
        for fn in model.functions:  # outer functions come first: inner ones overwrite them
            stack: list[cst.CSTNode] = [fn.node.body]
            while stack:
                current = stack.pop()
                index[id(current)] = fn
                stack.extend(child_nodes(current))
        model.function_index = index
    return index.get(id(node))


def finding_reach(model: ModuleModel, node: cst.CSTNode, needs_capture: bool) -> tuple[Confidence, str | None]:
    """How capture reaches the code at `node`: its tier and, when it is reachable, why (followed
    back along calls to where reachability starts). In code no capture reaches, a finding of a
    rule about capture (`needs_capture`: OFL106's eager `non_blocking` copies) is `low`; other
    rules' findings there (a no-op `record_stream`, an eager race) are hazards however the code
    runs: `high`. In a low-tier method (a scheduler's, an allocator's) every finding is `low`."""
    fn = function_of(model, node)
    if fn is None or not fn.reachable or fn.confidence is None:
        in_region = fn is not None and any(site.node is node and site.in_graph_region for site in fn.calls)
        return (LOW if needs_capture and not in_region else HIGH), None
    site = next((site for site in fn.calls if site.node is node), None)
    in_region = site is not None and site.in_graph_region
    confidence = HIGH if in_region else fn.confidence
    fallback = None if site is None or in_region else capture_fallback(model, site.guards, fn)
    if fallback is not None and needs_capture:
        return LOW, (
            f"runs while capturing only when `{model.code_for(fallback)}` is false: the capture branch"
            f" of {fn.qualname} handles capture otherwise"
        )
    if fn.reachable_via is None:
        return confidence, fn.reachable_reason
    # "called from A._impl ← A.forward (forward path of offloader-style class A: …)"
    chain: list[str] = []
    seen = {id(fn)}
    root = fn
    while root.reachable_via is not None and id(root.reachable_via) not in seen and len(chain) < 4:
        root = root.reachable_via
        seen.add(id(root))
        chain.append(root.qualname)
    if root.reachable_via is not None:
        chain.append("…")
    verb = "defined inside" if fn.reachable_reason.startswith("defined inside") else "called from"
    if root.reachable_reason.startswith("called from "):  # another module's caller: one chain
        return confidence, f"{verb} {' ← '.join(chain)} ← {root.reachable_reason.removeprefix('called from ')}"
    return confidence, f"{verb} {' ← '.join(chain)} ({root.reachable_reason})"
