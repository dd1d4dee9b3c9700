"""The semantic model of one module that every rule reads.

Built in one pass over a parsed module, without libcst metadata providers (positions are
resolved later, and only for nodes that are reported). It records:

- every function and method (`FunctionInfo`) with its class, its parent function, and whether
  it is *capture-reachable* (shared/CATALOGUE.md) and why;
- every call inside a function (`CallSite`) with the capture context it runs in (capturing,
  eager, or unknown = may be capturing), the stream contexts (`with torch.cuda.stream(s)`)
  around it, and whether it sits in a `torch.cuda.graph(...)` / `capture_begin()` region;
- flow-insensitive kinds (stream, event, pinned tensor, ...) of locals, `self.` attributes and
  module globals (`kinds.py`).

What it is made of is `program.py`; the walk of each function body is `walker.py`; the
answers to "may this run during a capture" are `reachability.py`.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TypeVar, cast

import libcst as cst

from offlint.analysis.context import Context
from offlint.analysis.imports import NameResolver, dotted_name
from offlint.analysis.kinds import Kind, KindOracle, Lookup, Typed, join, self_attribute
from offlint.analysis.program import (
    CallSite,
    ClassInfo,
    FunctionInfo,
    ModelOptions,
)
from offlint.analysis.skeleton import SkeletonGap
from offlint.analysis.syntax import (
    SCOPE_TYPES,
    child_nodes,
    falsy_literal,
    may_hold_statements,
    own_nodes,
    same_code,
)
from offlint.analysis.torch_api import (
    ACCELERATOR_METHODS,
    CAPTURE_IMPLIES,
    CAPTURE_TESTS,
    STREAM_CONTEXTS,
    STREAM_ORDERING_METHODS,
    is_imported_capture_predicate,
)

_T = TypeVar("_T")

class ModuleModel:
    def __init__(
        self,
        module: cst.Module,
        options: ModelOptions | None = None,
        *,
        source_of: Callable[[cst.CSTNode], str | None] | None = None,
        imports: Sequence[cst.Import | cst.ImportFrom] | None = None,
    ) -> None:
        """`module` is a libcst tree or a skeleton (`skeleton.py`); for a skeleton, `source_of`
        gives a node's source text (a skeleton cannot be printed) and `imports` its import
        statements in source order (found while it was built)."""
        self.module = module
        self.source_of = source_of
        self.options = options or ModelOptions()
        self._hints = {(fn, text): kind for fn, text, kind in self.options.hints if kind != "external event"}
        self.resolver = NameResolver.of(module, imports)
        self.oracle = KindOracle(self.resolver, self.resolver.imports_torch())
        self.classes: list[ClassInfo] = []
        self.functions: list[FunctionInfo] = []
        self.module_functions: dict[str, FunctionInfo] = {}
        self.graph_region_calls: list[CallSite] = []
        self.function_index: dict[int, FunctionInfo] | None = None  # reachability.function_of
        self._classes_by_name: dict[str, ClassInfo] | None = None  # _class_of_local
        self._all_method_names: frozenset[str] | None = None  # _method_names
        # branch_contexts of boolean chains, for the walk of one expression (`_Walker.expression`)
        self._branch_memo: dict[tuple[int, int], tuple[Context | None, Context | None]] = {}
        self._callers: dict[int, list[CallSite]] | None = None  # callers_of
        # this module captures in segments, marks eager breaks or defines the segmented capture
        self.segmented_capture = False
        self.capture_aware_joins: list[FunctionInfo] | None = None  # facts.capture_aware_joins
        # facts about a class's attributes the rules ask at every use (`remembered`)
        self._memo: dict[tuple[Hashable, ...], object] = {}
        self._lookups: dict[int, Lookup] = {}
        self.field_kinds: dict[str, Typed] = {}  # Lookup.fields, filled with the class attributes
        self._collect_definitions()
        self._collect_device_modules()
        self._collect_globals()
        self._hand_down_from_other_modules()
        # kinds first (two rounds so `self.a = local_ev` sees the local's kind), then bodies
        for _ in range(2):
            for fn in self.functions:
                self._collect_bindings(fn)
            for cls in self.classes:
                self._collect_class_attrs(cls)
            self._share_attributes_in_families()
        for _ in range(3):  # a stream or event handed down a chain of calls, one link per round
            changed = self._type_parameters_by_callers()
            if not changed:
                break
            for fn in dict.fromkeys(changed):
                self._collect_bindings(fn)
            self._share_attributes_in_families()

    def dispose(self) -> None:
        """Break the model's reference cycles (a call site and its function point at each other)
        so that reference counting frees the model and its tree at once. Left to the cyclic
        collector, the millions of tree objects they keep alive cost a quarter of a run."""
        for fn in self.functions:
            fn.calls = []
            fn.assignments = []
            fn.returns = []
            fn.stream_withs = []
        for cls in self.classes:
            cls.methods = {}
        self.functions = []
        self.classes = []
        self.module_functions = {}
        self.graph_region_calls = []
        self.function_index = None
        self.capture_aware_joins = None
        self._memo = {}
        self._callers = None
        self._lookups = {}

    # ------------------------------------------------------------------ queries
    def remembered(self, key: tuple[Hashable, ...], make: Callable[[], _T]) -> _T:
        """`make()`, once per key for this model: a class-wide fact asked at every call site (the
        stores of `self.ev` in every method) would otherwise make a big class quadratic."""
        if key not in self._memo:
            self._memo[key] = make()
        return cast(_T, self._memo[key])

    def code_for(self, node: cst.CSTNode) -> str:
        """The source text of `node`, without its own parentheses (as its reported range)."""
        if self.source_of is not None:
            text = self.source_of(node)
            if text is None:
                raise SkeletonGap(f"no source position for a {type(node).__name__}")
            return text
        if getattr(node, "lpar", None):
            node = node.with_changes(lpar=[], rpar=[])
        return self.module.code_for_node(node)

    def qualname(self, expr: cst.BaseExpression) -> str | None:
        return self.resolver.qualname(expr)

    def lookup_for(self, fn: FunctionInfo | None) -> Lookup:
        """The bindings `fn` sees. Made once per function: the dicts it views are filled in place
        as the model is built, and rules ask for it at every call site."""
        found = self._lookups.get(id(fn))
        if found is not None:
            return found
        cls = fn.cls if fn is not None else None
        scopes = []
        scope = fn
        while scope is not None:  # a closure sees its enclosing functions' locals, as Python does
            scopes.append(scope)
            scope = scope.parent
        found = self._lookups[id(fn)] = Lookup(
            ChainMap(*(f.locals for f in scopes)) if len(scopes) > 1 else (fn.locals if fn else {}),
            ChainMap(*(f.local_elements for f in scopes)) if len(scopes) > 1 else (fn.local_elements if fn else {}),
            cls.attrs if cls else {},
            cls.attr_elements if cls else {},
            self.oracle.globals,
            cls.method_returns if cls else {},
            self.field_kinds,
        )
        return found

    def kind_of(self, expr: cst.BaseExpression, fn: FunctionInfo | None) -> Typed:
        found = self.oracle.of(expr, self.lookup_for(fn))
        if not found.known and fn is not None and self._hints:
            hinted = self._hinted(expr, fn)
            if hinted is not None:
                return hinted
        return found

    def _hinted(self, expr: cst.BaseExpression, fn: FunctionInfo) -> Typed | None:
        """What the semantic core's objects say of a receiver this model cannot type."""
        try:
            text = self.code_for(expr)
        except SkeletonGap:
            return None
        kind = self._hints.get((fn.qualname, text))
        return Typed(Kind(kind)) if kind is not None else None

    def all_calls(self) -> Iterator[CallSite]:
        for fn in self.functions:
            yield from fn.calls

    def is_capture_test(self, expr: cst.BaseExpression, fn: FunctionInfo | None) -> bool:
        """True when `expr` is true exactly while capturing."""
        if isinstance(expr, cst.Call):
            q = self.qualname(expr.func)
            if q in CAPTURE_TESTS:
                return True
            if q is not None and is_imported_capture_predicate(q):
                return True  # `from ...capture_mode import get_is_capture_mode`: another module's helper
            target = self._called_function(expr, fn)
            return target is not None and target.is_capture_predicate
        if isinstance(expr, cst.Name) and fn is not None:
            scope: FunctionInfo | None = fn
            while scope is not None:
                if expr.value in scope.capture_flags:
                    return True
                scope = scope.parent
            return False
        attr = self_attribute(expr)
        if attr is not None and fn is not None and fn.cls is not None:
            return attr in fn.cls.capture_flags
        return False

    def capture_condition(self, test: cst.BaseExpression, fn: FunctionInfo | None) -> Context | None:
        """The context of the body of `if test:` - CAPTURING, EAGER, or None (not a capture test)."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self.capture_condition(test.expression, fn)
            return inner.negate() if inner is not None else None
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            # all conjuncts hold in the body: one capture test decides it
            for side in (test.left, test.right):
                decided = self.capture_condition(side, fn)
                if decided is not None:
                    return decided
            return None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            comp = test.comparisons[0]
            if isinstance(comp.comparator, cst.Name) and comp.comparator.value in ("True", "False"):
                inner = self.capture_condition(test.left, fn)
                if inner is None:
                    return None
                positive = isinstance(comp.operator, cst.Is | cst.Equal)
                if comp.comparator.value == "False":
                    positive = not positive
                return inner if positive else inner.negate()
            return None
        if isinstance(test, cst.Name) and fn is not None and test.value in fn.eager_flags:
            return Context.EAGER
        return Context.CAPTURING if self.is_capture_test(test, fn) else None

    def branch_contexts(
        self, test: cst.BaseExpression, fn: FunctionInfo | None
    ) -> tuple[Context | None, Context | None]:
        """The contexts of the body and of the else branch of `if test:` (None: not decided by
        the test). Unlike `capture_condition`, sound for conjunctions and disjunctions: the else
        branch of `if capturing and x:` may still run while capturing."""
        if isinstance(test, cst.BooleanOperation):
            # a chain `a and b and ...` is asked about at each of its levels while it is walked:
            # remember the answers for the walk of one expression (linear, not quadratic)
            key = (id(test), id(fn))
            memo = self._branch_memo.get(key)
            if memo is None:
                memo = self._branch_memo[key] = self._branch_contexts(test, fn)
            return memo
        return self._branch_contexts(test, fn)

    def _branch_contexts(
        self, test: cst.BaseExpression, fn: FunctionInfo | None
    ) -> tuple[Context | None, Context | None]:
        if fn is not None and _run_once_test(test, fn):
            return Context.EAGER, None  # lazy one-time set-up: the warm-up before any capture ran it
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            body, other = self.branch_contexts(test.expression, fn)
            return other, body
        if isinstance(test, cst.BooleanOperation):
            left = self.branch_contexts(test.left, fn)
            right = self.branch_contexts(test.right, fn)
            if isinstance(test.operator, cst.And):  # body: both hold; else: either fails
                body = left[0] or right[0]
                if body is Context.CAPTURING and (
                    (left[0] is Context.CAPTURING and self.implied_by_capture(test.right))
                    or (right[0] is Context.CAPTURING and self.implied_by_capture(test.left))
                ):
                    # `if t.device.type == "cuda" and capturing: skip` - what the else branch runs
                    # while capturing is for a tensor off the GPU: no CUDA work to capture
                    return body, Context.EAGER
                return body, None
            if isinstance(test.operator, cst.Or):  # body: either holds; else: both fail
                return None, left[1] or right[1]
        flag = self._eager_only_value_test(test, fn)
        if flag is not None:
            return flag
        if fn is not None and any(same_code(test, seen) for seen in fn.eager_tests):
            return Context.EAGER, None  # it held before where a capture returned early
        if fn is not None and any(same_code(test, seen) for seen in fn.training_tests):
            return Context.EAGER, None  # autograd records then: no inference capture runs it
        if _tests_cpu_tensor(test) or _cpu_tensor_flag(test, fn):
            return Context.EAGER, None  # `if t.device.type == "cpu":` no CUDA work to capture there
        placed = _tests_already_placed(test, fn)
        if placed is not None:
            return placed
        decided = self.capture_condition(test, fn)
        if decided is None:
            return None, None
        return decided, decided.negate()

    def _eager_only_value_test(
        self, test: cst.BaseExpression, fn: FunctionInfo | None
    ) -> tuple[Context | None, Context | None] | None:
        """`if v is not None:` (or `if v:`) where the local `v` starts as None and is set only
        where no capture runs (`dump_dir = None; if capturing: ... else: dump_dir = make()`): a
        flag derived from the capture test, so that branch is eager; `if v is None:` the else."""
        positive = True
        name = test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            comp = test.comparisons[0]
            if not (isinstance(comp.comparator, cst.Name) and comp.comparator.value == "None"):
                return None
            if isinstance(comp.operator, cst.IsNot):
                positive = True
            elif isinstance(comp.operator, cst.Is):
                positive = False
            else:
                return None
            name = test.left
        if fn is None or not isinstance(name, cst.Name) or not _set_only_eagerly(fn, name.value):
            return None
        return (Context.EAGER, None) if positive else (None, Context.EAGER)

    def implied_by_capture(self, expr: cst.BaseExpression) -> bool:
        """A test that holds whenever a capture is under way, or whose failure leaves no CUDA
        work to capture: `torch.cuda.is_available()`, `t.device.type == "cuda"`, and the feature
        probe `hasattr(torch.cuda, "is_current_stream_capturing")` (flashinfer's spelling)."""
        if isinstance(expr, cst.Call) and self.qualname(expr.func) in CAPTURE_IMPLIES:
            return True
        return self._probes_capture_api(expr) or _tests_cuda_tensor(expr)

    def _probes_capture_api(self, expr: cst.BaseExpression) -> bool:
        """`hasattr(torch.cuda, "is_current_stream_capturing")`: true on every torch that can
        capture, so `probe and capturing` is as good as `capturing`."""
        if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "hasattr"):
            return False
        if len(expr.args) != 2 or self.qualname(expr.args[0].value) != "torch.cuda":
            return False
        probed = expr.args[1].value
        return isinstance(probed, cst.SimpleString) and (
            f"torch.cuda.{probed.evaluated_value!s}" in CAPTURE_TESTS | CAPTURE_IMPLIES
        )

    def callers_of(self, fn: FunctionInfo) -> list[CallSite]:
        """The same-module call sites that call `fn` (`f(...)`, `self.m(...)`); indexed once."""
        if self._callers is None:
            self._callers = {}
            for site in self.all_calls():
                target = self._called_function(site.node, site.function)
                if target is not None and target is not site.function:
                    self._callers.setdefault(id(target), []).append(site)
        return self._callers.get(id(fn), [])

    def _called_function(self, call: cst.Call, fn: FunctionInfo | None) -> FunctionInfo | None:
        """The same-module function a call reaches: `f()` or `self.m()` (`m` found along the
        class's bases, as Python's method resolution does)."""
        if isinstance(call.func, cst.Name):
            return self.module_functions.get(call.func.value)
        attr = self_attribute(call.func)
        if attr is not None and fn is not None and fn.cls is not None:
            return self.method_of(fn.cls, attr)
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and fn is not None
            and func.attr.value in self._method_names()
        ):
            if isinstance(func.value, cst.Name):
                cls = self._class_of_local(func.value.value, fn)
            else:
                held = self_attribute(func.value)  # `self.offloader.wait()`
                cls = self.class_of_attribute(fn.cls, held) if held is not None and fn.cls is not None else None
            if cls is not None:
                return self.method_of(cls, func.attr.value)
        return None

    def bases_of(self, cls: ClassInfo) -> list[ClassInfo]:
        """The same-module classes `cls` derives from, in the order written."""
        by_name = self._classes_named()
        found = (by_name.get(base.rsplit(".", 1)[-1]) for base in cls.bases)
        return [base for base in found if base is not None and base is not cls]

    def ancestry(self, cls: ClassInfo) -> list[ClassInfo]:
        """`cls` and its same-module ancestors, depth first in base order (Python's method
        resolution order for the hierarchies offloaders write), each once."""
        order: list[ClassInfo] = []
        pending = [cls]
        while pending and len(order) < 32:
            current = pending.pop(0)
            if current in order:
                continue
            order.append(current)
            pending[:0] = self.bases_of(current)
        return order

    def method_of(self, cls: ClassInfo, name: str) -> FunctionInfo | None:
        """The method `name` an instance of `cls` runs: its own, else the first base's that
        defines it."""
        for holder in self.ancestry(cls):
            method = holder.methods.get(name)
            if method is not None:
                return method
        return None

    def runs_on(self, fn: FunctionInfo, cls: ClassInfo) -> bool:
        """`fn` is a method an instance of `cls` runs: its own, or one it inherits from a
        same-module base (a base's method sees the subclass's `self.` attributes)."""
        return fn.cls is not None and fn.cls in self.ancestry(cls)

    def _share_attributes_in_families(self) -> None:
        """What `self.x` is, shared along each class's same-module ancestry both ways: a
        subclass inherits its bases' attributes, and a base's method runs with `self` an
        instance of a subclass that binds them (`Base.get` waiting on `self.event` made in
        `Prefetcher.__init__`)."""
        for cls in self.classes:
            for ancestor in self.ancestry(cls)[1:]:
                for mine, theirs in ((cls.attrs, ancestor.attrs), (cls.attr_elements, ancestor.attr_elements)):
                    for name, typed in list(mine.items()):
                        if name not in theirs or not theirs[name].known:
                            theirs[name] = join(theirs.get(name), typed)
                    for name, typed in list(theirs.items()):
                        if name not in mine or not mine[name].known:
                            mine[name] = join(mine.get(name), typed)
                ancestor.capture_flags |= cls.capture_flags
                cls.capture_flags |= ancestor.capture_flags
        agreed: dict[str, Typed | None] = {}
        for cls in self.classes:
            for name, typed in cls.attrs.items():
                if typed.known and typed.kind in (Kind.STREAM, Kind.EVENT):
                    agreed[name] = typed if agreed.get(name, typed) == typed else None
                elif typed.known:
                    agreed[name] = None  # another kind elsewhere: not a field to guess by name
        self.field_kinds.clear()
        self.field_kinds.update({name: typed for name, typed in agreed.items() if typed is not None})

    def _method_names(self) -> frozenset[str]:
        if self._all_method_names is None:
            self._all_method_names = frozenset(name for cls in self.classes for name in cls.methods)
        return self._all_method_names

    def class_of_attribute(self, cls: ClassInfo, attr: str) -> ClassInfo | None:
        """The same-module class of what `self.<attr>` holds: every store of it (along the
        class's bases) is `Cls(...)`, or a parameter of the storing method annotated `Cls`."""
        found: ClassInfo | None = None
        for holder in self.ancestry(cls):
            for fn, value in attribute_stores(holder, attr):
                if value is None or (isinstance(value, cst.Name) and value.value == "None"):
                    continue
                made = self._class_made_by(value)
                if made is None and isinstance(value, cst.Name):
                    made = self._class_of_local(value.value, fn)
                if made is None or (found is not None and made is not found):
                    return None
                found = made
        return found

    def _class_of_local(self, name: str, fn: FunctionInfo) -> ClassInfo | None:
        """The same-module class of a parameter annotated with it (`pending: _PendingPlan`) or of
        a local made from it (`plan = _PendingPlan(...)`)."""
        by_name = self._classes_named()
        if not by_name or name == "self":
            return None
        if name in fn.locals and fn.locals[name].known:
            return None  # typed already (a stream, a tensor): not an instance of a class here
        for param in (*fn.node.params.params, *fn.node.params.kwonly_params, *fn.node.params.posonly_params):
            if param.name.value == name:
                annotation = param.annotation.annotation if param.annotation is not None else None
                if isinstance(annotation, cst.SimpleString) and isinstance(annotation.evaluated_value, str):
                    return by_name.get(annotation.evaluated_value)
                return by_name.get(annotation.value) if isinstance(annotation, cst.Name) else None
        made = None
        for assign in fn.assignments:
            if any(isinstance(t, cst.Name) and t.value == name for t in assign.targets):
                value = assign.value
                cls = by_name.get(value.func.value) if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) else None
                if cls is None or (made is not None and made is not cls):
                    return None  # bound to something else too
                made = cls
        return made

    # ------------------------------------------------------------------ building
    def _collect_definitions(self) -> None:
        _Definitions(self).run(self.module)

    def _collect_device_modules(self) -> None:
        """Names bound to a torch device module (`device_module = torch.get_device_module(d)`,
        `self.mod = getattr(torch, device_type)`), for the resolver: a name counts when every
        value bound to it in the module (None aside) is one, chains of such names included."""
        values: dict[str, list[cst.BaseExpression]] = {}
        for assign in module_level_assigns(self.module):
            for target in assign.targets:
                if isinstance(target.target, cst.Name):
                    values.setdefault(target.target.value, []).append(assign.value)
        for fn in self.functions:
            if fn.binding_nodes is None:  # collected once, read by every round of `_collect_bindings`
                fn.binding_nodes = [n for n in own_nodes(fn.node.body) if type(n) in _BINDING_TYPES]
            for node in fn.binding_nodes:
                if isinstance(node, cst.Assign):
                    for target in node.targets:
                        dotted = dotted_name(target.target)
                        if dotted is not None and dotted.count(".") <= (1 if dotted.startswith("self.") else 0):
                            values.setdefault(dotted, []).append(node.value)
        resolver = self.resolver
        # an accelerator object of the project's own (diffusers' `TorchDeviceBackend(device)`,
        # DeepSpeed's `get_accelerator()`) is known by use: the module calls `.current_stream()`,
        # `.Stream()` or `.Event()` on it; it stands for the device module it wraps
        duck_receivers: set[tuple[str, bool]] = set()
        for fn in self.functions:
            for node in fn.binding_nodes or ():
                if type(node) is cst.Call:
                    receiver = _accelerator_receiver(cast(cst.Call, node))
                    if receiver is not None:
                        duck_receivers.add(receiver)
        for name, called in duck_receivers:
            imported = resolver.bindings.get(name.partition(".")[0], "")
            if imported == "torch" or imported.startswith("torch."):
                continue  # torch's own API: typed by name already
            bound = values.get(name)
            if called:  # `get_accelerator().current_stream()`
                resolver.accelerator_factories.add(name)
                continue
            if bound is not None and all(_is_none_literal(v) or _project_call(v, resolver) for v in bound):
                for value in bound:
                    if isinstance(value, cst.Call):
                        factory = dotted_name(value.func)
                        if factory is not None:
                            resolver.accelerator_factories.add(factory)
        candidates = {name: bound for name, bound in values.items() if name not in resolver.bindings}
        changed = True
        while changed:  # a second round for `dm = self.device_module` after `self.device_module = ...`
            changed = False
            for name, bound in list(candidates.items()):
                if all(_is_none_literal(v) for v in bound):
                    del candidates[name]
                elif all(_is_none_literal(v) or resolver.device_module_of(v) is not None for v in bound):
                    resolver.device_modules.add(name)
                    del candidates[name]
                    changed = True

    def _collect_globals(self) -> None:
        lookup = Lookup({}, {}, {}, {}, self.oracle.globals)
        for small in module_level_assigns(self.module):
            typed = self.oracle.of(small.value, lookup)
            for target in small.targets:
                if isinstance(target.target, cst.Name):
                    name = target.target.value
                    self.oracle.globals[name] = join(self.oracle.globals.get(name), typed)

    def _collect_bindings(self, fn: FunctionInfo) -> None:
        lookup = self.lookup_for(fn)
        for param in _all_params(fn.node.params):
            given = fn.handed_down.get(param.name.value)
            if given is not None:
                fn.locals[param.name.value] = given  # narrower than `t: torch.Tensor`
            elif param.annotation is not None:
                fn.locals[param.name.value] = join(
                    fn.locals.get(param.name.value), self.oracle.of_annotation(param.annotation.annotation)
                )
        if fn.binding_nodes is None:  # collected once, read by every round
            fn.binding_nodes = [n for n in own_nodes(fn.node.body) if type(n) in _BINDING_TYPES]
        if not fn.global_names:  # `global _STREAM`: its assignments bind the module's global
            fn.global_names.update(
                item.name.value for node in fn.binding_nodes if type(node) is cst.Global for item in node.names
            )
        for node in fn.binding_nodes:
            if isinstance(node, cst.Assign):
                typed = self.oracle.of(node.value, lookup)
                element = self._element_kind(node.value, lookup)
                for target in node.targets:
                    self._bind(fn, target.target, typed, element, node.value)
            elif isinstance(node, cst.AnnAssign):
                typed = self.oracle.of_annotation(node.annotation.annotation)
                if node.value is not None:
                    typed = join(typed, self.oracle.of(node.value, lookup))
                self._bind(fn, node.target, typed, None, node.value)
            elif isinstance(node, cst.Nonlocal):
                fn.nonlocals.update(item.name.value for item in node.names)
            elif isinstance(node, cst.Return):
                made = self._class_made_by(node.value)
                if made is not None and fn.name != "__init__":
                    made.made_per_call = True
                if node.value is not None and fn.cls is not None and fn.parent is None and not _is_none_literal(node.value):
                    # what `self.<method>(...)` gives its callers in the class
                    gives = self.oracle.of(node.value, lookup)
                    fn.cls.method_returns[fn.name] = join(fn.cls.method_returns.get(fn.name), gives)
                if node.value is not None and fn.parent is None and fn.cls is None:
                    # what a module function returns (`def get_side_stream(): return _STREAM`)
                    name = fn.name
                    self.oracle.returns[name] = join(self.oracle.returns.get(name), self.oracle.of(node.value, lookup))
            elif isinstance(node, cst.With):
                for item in node.items:
                    if item.asname is not None and isinstance(item.asname.name, cst.Name):
                        typed = self.oracle.of(item.item, lookup)
                        fn.locals[item.asname.name.value] = join(fn.locals.get(item.asname.name.value), typed)
            elif (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in ("append", "add")
                and node.args
            ):
                # `self.events.append(ev)` / `events.append(Event())`
                typed = self.oracle.of(node.args[0].value, lookup)
                container = node.func.value
                if isinstance(container, cst.Name):
                    fn.local_elements[container.value] = join(fn.local_elements.get(container.value), typed)
                attr = self_attribute(container)
                if attr is not None and fn.cls is not None:
                    fn.cls.attr_elements[attr] = join(fn.cls.attr_elements.get(attr), typed)
            elif isinstance(node, cst.Call):
                self._type_parameters_by_use(fn, node)
                func = node.func
                if type(func) is cst.Attribute and func.attr.value == "register_hook" and node not in fn.gradient_hooks:
                    fn.gradient_hooks.append(node)
        returned = _sole_returned_value(fn.node.body)
        if returned is not None and (
            self.is_capture_test(returned, fn)
            # `return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()`
            or self.capture_condition(returned, fn) is Context.CAPTURING
        ):
            fn.is_capture_predicate = True

    def _hand_down_from_other_modules(self) -> None:
        """Parameters to which the calls of other modules that reach a function hand a known
        kind (`callgraph.Seed.handed`: `value=<a pageable host tensor>`) take that kind."""
        by_qualname = {fn.qualname: fn for fn in self.functions}
        for seed in self.options.seeds:
            fn = by_qualname.get(seed.qualname)
            if fn is None or not seed.handed:
                continue
            params = fn.node.params
            positional = [p.name.value for p in (*params.posonly_params, *params.params)]
            if fn.cls is not None:
                positional = []  # `obj.m(...)` binds `self`, `Cls.m(obj, ...)` does not: by keyword only
            names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
            for key, kind in seed.handed:
                if key.startswith("#"):
                    index = int(key[1:])
                    name = positional[index] if index < len(positional) else None
                else:
                    name = key if key in names else None
                if name is not None:
                    fn.handed_down[name] = Typed(Kind(kind))

    def _class_made_by(self, value: cst.BaseExpression | None) -> ClassInfo | None:
        """The same-module class `value` constructs (`_Pending(...)`), if any."""
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return None
        return self._classes_named().get(value.func.value)

    def _classes_named(self) -> dict[str, ClassInfo]:
        if self._classes_by_name is None:
            self._classes_by_name = {cls.name: cls for cls in self.classes}
        return self._classes_by_name

    def _callee_of(self, call: cst.Call, fn: FunctionInfo) -> tuple[FunctionInfo, int] | None:
        """The same-module function or constructor (`__init__`) a call runs, with how many of its
        leading parameters the call does not pass (`self`)."""
        made = self._class_made_by(call)
        if made is not None:
            init = made.methods.get("__init__")
            return (init, 1) if init is not None else None
        target = self._called_function(call, fn)
        if target is None:
            return None
        return target, 1 if target.cls is not None and isinstance(call.func, cst.Attribute) else 0

    def _type_parameters_by_callers(self) -> list[FunctionInfo]:
        """Unannotated parameters that every same-module caller passes a stream, an event or a
        pinned host tensor take that kind (`_Pending(ready_event=self.ready_event)`): a helper or
        a result object holds the caller's object. Returns the functions whose parameters changed."""
        passed: dict[
            tuple[int, str],
            tuple[FunctionInfo, list[Typed], list[tuple[cst.BaseExpression, FunctionInfo]]],
        ] = {}
        for fn in self.functions:
            lookup = self.lookup_for(fn)
            for node in fn.binding_nodes or ():
                if type(node) is not cst.Call:
                    continue
                call = cast(cst.Call, node)
                callee = self._callee_of(call, fn) if call.args else None
                if callee is None:
                    continue
                target, skipped = callee
                params = [*target.node.params.posonly_params, *target.node.params.params][skipped:]
                by_name = {p.name.value: p for p in (*params, *target.node.params.kwonly_params)}
                for index, arg in enumerate(call.args):
                    if arg.star:
                        break
                    if arg.keyword is not None:
                        param = by_name.get(arg.keyword.value)
                    else:
                        param = params[index] if index < len(params) else None
                    if param is None:
                        continue
                    entry = passed.setdefault((id(target), param.name.value), (target, [], []))
                    entry[1].append(self.oracle.of(arg.value, lookup))
                    entry[2].append((arg.value, fn))
        changed: list[FunctionInfo] = []
        for (_, name), (target, kinds, args) in passed.items():
            first = kinds[0]
            if (
                first.kind not in _HANDED_DOWN_KINDS
                or first.guessed
                or any(k != first for k in kinds)
            ):
                continue
            held = target.locals.get(name)
            narrows = (
                held is None
                or not held.known
                or (held.kind is Kind.TENSOR and first.kind is Kind.PINNED_HOST)
            )
            if first.kind is Kind.STREAM:
                target.handed_args[name] = args
            if narrows and held != first:
                target.locals[name] = target.handed_down[name] = first
                changed.append(target)
        return changed

    def _type_parameters_by_use(self, fn: FunctionInfo, call: cst.Call) -> None:
        """A parameter used as only a stream can be: the receiver of `wait_stream`, `wait_event`
        or `record_event`, the argument of `wait_stream` or of `torch.cuda.stream`. (An event
        argument is not typed by its use: a wait on an event handed in is OFL101's question, and
        the caller usually recorded it in the same forward.)"""
        uses: list[cst.BaseExpression] = []
        func = call.func
        first = call.args[0].value if call.args and call.args[0].keyword is None else None
        if isinstance(func, cst.Attribute) and func.attr.value in _STREAM_RECEIVER_METHODS:
            uses.append(func.value)
            if first is not None and func.attr.value == "wait_stream":
                uses.append(first)
        if first is not None and self.qualname(func) in STREAM_CONTEXTS:
            uses.append(first)
        for expr in uses:
            if isinstance(expr, cst.Name) and expr.value != "self" and _is_parameter_of(fn, expr.value):
                name = expr.value
                fn.locals[name] = join(fn.locals.get(name), Typed(Kind.STREAM))
                continue
            attr = self_attribute(expr)
            if attr is not None and fn.cls is not None:
                # `self.d2h = Manager.get_instance().d2h_stream` (opaque) ... `self.d2h.wait_stream(...)`
                held = fn.cls.attrs.get(attr)
                if held is None or held.kind is Kind.UNKNOWN:
                    fn.cls.attrs[attr] = Typed(Kind.STREAM)

    def _element_kind(self, value: cst.BaseExpression, lookup: Lookup) -> Typed | None:
        if isinstance(value, cst.ListComp):
            return self.oracle.of(value.elt, lookup)
        if isinstance(value, cst.List | cst.Tuple) and value.elements:
            kinds = [self.oracle.of(e.value, lookup) for e in value.elements]
            result: Typed | None = None
            for k in kinds:
                result = join(result, k)
            return result
        if isinstance(value, cst.DictComp):
            return self.oracle.of(value.value, lookup)
        if isinstance(value, cst.Dict) and value.elements:
            # `{"copy": torch.cuda.Stream(), ...}`: its values; `**spread` entries say nothing
            result = None
            for entry in value.elements:
                if isinstance(entry, cst.DictElement):
                    result = join(result, self.oracle.of(entry.value, lookup))
            return result
        return None

    def _bind(
        self,
        fn: FunctionInfo,
        target: cst.BaseExpression,
        typed: Typed,
        element: Typed | None,
        value: cst.BaseExpression | None,
    ) -> None:
        capture_flag = value is not None and self.is_capture_test(value, fn)
        if typed.kind is Kind.NOT_TORCH and value is not None and _same_target(target, _chain_root(value)):
            # `x = x.tolist()`: x holds a tensor before and a list after, and bindings are not
            # flow-sensitive; the conversion out of torch must not hide the tensor (the
            # conversion itself is the sync)
            typed = Typed(Kind.UNKNOWN)
        if isinstance(target, cst.Name) and target.value in fn.global_names:
            self.oracle.globals[target.value] = join(self.oracle.globals.get(target.value), typed)
            return
        if isinstance(target, cst.Name):
            name = target.value
            fn.locals[name] = join(fn.locals.get(name), typed)
            if element is not None:
                fn.local_elements[name] = join(fn.local_elements.get(name), element)
            if capture_flag:
                fn.capture_flags.add(name)
            elif (
                isinstance(value, cst.UnaryOperation)
                and isinstance(value.operator, cst.Not)
                and self.is_capture_test(value.expression, fn)
            ):
                fn.eager_flags.add(name)  # `check = not torch.cuda.is_current_stream_capturing()`
            return
        attr = self_attribute(target)
        if attr is not None and fn.cls is not None:
            held = fn.cls.attrs.get(attr)
            if isinstance(value, cst.Name) and value.value in fn.handed_down and held == Typed(Kind.TENSOR):
                held = None  # what the callers hand down narrows the parameter's `torch.Tensor`
            fn.cls.attrs[attr] = join(held, typed)
            if element is not None:
                fn.cls.attr_elements[attr] = join(fn.cls.attr_elements.get(attr), element)
            if capture_flag:
                fn.cls.capture_flags.add(attr)
            return
        if isinstance(target, cst.Subscript):
            container = target.value
            if isinstance(container, cst.Name):
                fn.local_elements[container.value] = join(fn.local_elements.get(container.value), typed)
            attr = self_attribute(container)
            if attr is not None and fn.cls is not None:
                fn.cls.attr_elements[attr] = join(fn.cls.attr_elements.get(attr), typed)
            return
        if isinstance(target, cst.Tuple | cst.List):
            for element_node in target.elements:
                self._bind(fn, element_node.value, UNKNOWN_TYPED, None, None)

    def _collect_class_attrs(self, cls: ClassInfo) -> None:
        for stmt in cls.node.body.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        typed = self.oracle.of_annotation(small.annotation.annotation)
                        cls.attrs[small.target.value] = join(cls.attrs.get(small.target.value), typed)

    def mark_offloader_classes(self) -> None:
        for cls in self.classes:
            held = [
                name
                for attrs in (cls.attrs, cls.attr_elements)
                for name, t in attrs.items()
                if t.kind in (Kind.STREAM, Kind.EVENT) and not t.guessed
            ]
            ordering = next(
                (
                    call
                    for fn in self.functions
                    if fn.cls is cls
                    for call in fn.calls
                    if call.method in STREAM_ORDERING_METHODS or call.callee in STREAM_CONTEXTS
                ),
                None,
            )
            cls.offloader_style = bool(held) or ordering is not None
            # said in diagnostics' notes: what made the class count
            if held:
                cls.offloader_evidence = f"it keeps a CUDA stream or event in self.{held[0]}"
            elif ordering is not None:
                what = ordering.method or (ordering.callee or "").rsplit(".", 1)[-1]
                cls.offloader_evidence = f"it orders streams, {what} in {ordering.function.name}"

    def _function_named(self, expr: cst.BaseExpression, scope: FunctionInfo) -> FunctionInfo | None:
        """Resolve a hook/forward value: a local function, `self.m`, a module function,
        `functools.partial(f, ...)`, or a factory's result (`make_pre_hook(i)` returning its
        nested `hook`)."""
        if isinstance(expr, cst.Call):
            q = self.qualname(expr.func)
            if q == "functools.partial" or dotted_name(expr.func) in ("partial", "functools.partial"):
                return self._function_named(expr.args[0].value, scope) if expr.args else None
            factory = self._function_named(expr.func, scope) if isinstance(expr.func, cst.Name | cst.Attribute) else None
            return _returned_nested_function(self, factory) if factory is not None else None
        if isinstance(expr, cst.Name):
            for fn in self.functions:
                if fn.parent is scope and fn.name == expr.value:
                    return fn
            return self.module_functions.get(expr.value)
        attr = self_attribute(expr)
        if attr is not None and scope.cls is not None:
            return self.method_of(scope.cls, attr)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            # `KVOffloader._after_layer` (a partial binds `self` to it)
            cls = self._classes_named().get(expr.value.value)
            if cls is not None:
                return self.method_of(cls, expr.attr.value)
        return None


class _Definitions:
    """Finds every class and function, with their nesting (a module-level class: one defined in
    a method would be a reference cycle holding the whole tree)."""

    # a hand-rolled traversal: libcst's visitor machinery costs more than the parse
    def __init__(self, model: ModuleModel) -> None:
        self.model = model
        self.class_stack: list[ClassInfo] = []
        self.fn_stack: list[FunctionInfo] = []

    def run(self, node: cst.CSTNode) -> None:
        # definitions are statements: expressions and simple statements hold none
        node_type = type(node)
        if node_type is cst.ClassDef:
            self.visit_ClassDef(cast(cst.ClassDef, node))
            self.run(cast(cst.ClassDef, node).body)
            self.leave_ClassDef(cast(cst.ClassDef, node))
        elif node_type is cst.FunctionDef:
            self.visit_FunctionDef(cast(cst.FunctionDef, node))
            self.run(cast(cst.FunctionDef, node).body)
            self.leave_FunctionDef(cast(cst.FunctionDef, node))
        else:
            for child in child_nodes(node):
                if may_hold_statements(type(child)):
                    self.run(child)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        bases = tuple(d for d in (dotted_name(a.value) for a in node.bases) if d)
        info = ClassInfo(node=node, name=node.name.value, bases=bases)
        self.model.classes.append(info)
        self.class_stack.append(info)
        return True

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.class_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        parent = self.fn_stack[-1] if self.fn_stack else None
        cls = self.class_stack[-1] if self.class_stack else None
        if parent is not None and cls is not None and parent.cls is not cls:
            cls = parent.cls  # a class defined inside a function: keep it simple
        if parent is not None:
            qual = f"{parent.qualname}.<locals>.{node.name.value}"
            cls = parent.cls
        elif cls is not None:
            qual = f"{cls.name}.{node.name.value}"
        else:
            qual = node.name.value
        info = FunctionInfo(node=node, qualname=qual, cls=cls, parent=parent)
        self.model.functions.append(info)
        if parent is None and cls is not None and self.class_stack and self.class_stack[-1] is cls:
            cls.methods.setdefault(node.name.value, info)
        elif parent is None and cls is None:
            self.model.module_functions.setdefault(node.name.value, info)
        self.fn_stack.append(info)
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.fn_stack.pop()



UNKNOWN_TYPED = Typed(Kind.UNKNOWN)


# methods only a stream has (`s.wait_stream(x)`, `s.wait_event(ev)`, `s.record_event(ev)`)
_STREAM_RECEIVER_METHODS = frozenset({"wait_stream", "wait_event", "record_event"})


def _is_parameter_of(fn: FunctionInfo, name: str) -> bool:
    return any(p.name.value == name for p in _all_params(fn.node.params))


def _returned_nested_function(model: ModuleModel, factory: FunctionInfo) -> FunctionInfo | None:
    """The function a factory makes and returns: `def make_hook(i): def hook(...): ...; return hook`."""
    for ret in factory.returns:
        value = ret.node.value
        if isinstance(value, cst.Name):
            for fn in model.functions:
                if fn.parent is factory and fn.name == value.value:
                    return fn
    return None


def _sole_returned_value(body: cst.BaseSuite, depth: int = 0) -> cst.BaseExpression | None:
    """What a function made of one `return` returns - after a docstring, inside a `with`
    (`with torch.cuda.device(d): return ...`), or in a `try` whose handlers return a constant
    (`try: return ... except Exception: return False`) - with `bool(...)` taken off."""
    if not isinstance(body, cst.IndentedBlock) or depth > 2:
        return None
    statements = list(body.body)
    first = statements[0] if statements else None
    if (
        len(statements) > 1
        and isinstance(first, cst.SimpleStatementLine)
        and len(first.body) == 1
        and isinstance(first.body[0], cst.Expr)
        and isinstance(first.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    ):
        statements = statements[1:]  # the docstring
    if len(statements) != 1:
        return None
    only = statements[0]
    value: cst.BaseExpression | None = None
    if isinstance(only, cst.SimpleStatementLine) and len(only.body) == 1 and isinstance(only.body[0], cst.Return):
        value = only.body[0].value
    elif isinstance(only, cst.With) or (
        # `try: return ... except Exception: return False`
        isinstance(only, cst.Try)
        and only.orelse is None
        and only.finalbody is None
        and only.handlers
        and all(_returns_constant(handler.body) for handler in only.handlers)
    ):
        value = _sole_returned_value(only.body, depth + 1)
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "bool"
        and len(value.args) == 1
        and value.args[0].keyword is None
    ):
        value = value.args[0].value
    return value


def _returns_constant(body: cst.BaseSuite) -> bool:
    """An exception handler that returns False or None (`except Exception: return False`)."""
    if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
        return False
    only = body.body[0]
    return (
        isinstance(only, cst.SimpleStatementLine)
        and len(only.body) == 1
        and isinstance(only.body[0], cst.Return)
        and isinstance(only.body[0].value, cst.Name)
        and only.body[0].value.value in ("False", "None")
    )


def _set_only_eagerly(fn: FunctionInfo, name: str) -> bool:
    """The local `name` of `fn` is bound (so far) only to None, or to other values where no
    capture runs (an eager context), and to at least one such value."""
    if name in fn.nonlocals or name in fn.global_names or _is_parameter_of(fn, name):
        return False
    set_eagerly = False
    for assign in fn.assignments:
        for target in assign.targets:
            bound = [target] if isinstance(target, cst.Name) else [
                e.value for e in getattr(target, "elements", ()) if isinstance(e.value, cst.Name)
            ]
            if not any(t.value == name for t in bound):
                continue
            if isinstance(target, cst.Name) and assign.value is not None and _is_none_literal(assign.value):
                continue
            if assign.context is not Context.EAGER or isinstance(assign.node, cst.AugAssign):
                return False
            set_eagerly = True
    return set_eagerly


def _tests_cuda_tensor(expr: cst.BaseExpression) -> bool:
    """`t.is_cuda`, `t.device.type == "cuda"`: a test that a tensor lives on the GPU."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == "is_cuda"
    return _tests_device_type(expr, "cuda")


def _tests_cpu_tensor(expr: cst.BaseExpression) -> bool:
    """`t.device.type == "cpu"`, `not t.is_cuda`: a test that a tensor lives on the host; also
    `device == "cpu"` on a device-named value (the device the code places tensors on is the host:
    no GPU forward, so no graph capture, runs there - accelerate's int8 placement)."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return isinstance(expr.expression, cst.Attribute) and expr.expression.attr.value == "is_cuda"
    return _tests_device_type(expr, "cpu") or _names_the_cpu_device(expr)


def _names_the_cpu_device(expr: cst.BaseExpression) -> bool:
    """`device == "cpu"`, `self.offload_device == "cpu"` (either side)."""
    if not isinstance(expr, cst.Comparison) or len(expr.comparisons) != 1:
        return False
    comp = expr.comparisons[0]
    if not isinstance(comp.operator, cst.Equal):
        return False
    sides = (expr.left, comp.comparator)
    names = [(dotted_name(side) or "").rsplit(".", 1)[-1] for side in sides if isinstance(side, cst.Name | cst.Attribute)]
    return any(isinstance(side, cst.SimpleString) and side.evaluated_value == "cpu" for side in sides) and any(
        name == "device" or name.endswith("_device") for name in names
    )


def _tests_device_type(expr: cst.BaseExpression, device_type: str) -> bool:
    """`t.device.type == "<device_type>"` (either side)."""
    if not isinstance(expr, cst.Comparison) or len(expr.comparisons) != 1:
        return False
    comp = expr.comparisons[0]
    sides = (expr.left, comp.comparator)
    names = [dotted_name(side) or "" for side in sides if isinstance(side, cst.Attribute)]
    return (
        isinstance(comp.operator, cst.Equal)
        and any(isinstance(side, cst.SimpleString) and side.evaluated_value == device_type for side in sides)
        and any(name.endswith(".device.type") for name in names)
    )


def _tests_already_placed(
    test: cst.BaseExpression, fn: FunctionInfo | None
) -> tuple[Context | None, Context | None] | None:
    """`if module.device != self.execution_device:` (the branch that moves it there), or
    `if current_device == self.execution_device: return`: a hook that places its module on the
    execution device only when it is not there yet does so on the first forward after an offload -
    the eager warm-up every capture follows - so the not-there-yet branch is eager (accelerate's
    `CpuOffload`, diffusers' auto-offload hook)."""
    if fn is None or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    comp = test.comparisons[0]
    if not isinstance(comp.operator, cst.Equal | cst.NotEqual):
        return None
    sides = (test.left, comp.comparator)
    if not (any(_placement_of(fn, side) for side in sides) and any(_names_a_device(side) for side in sides)):
        return None
    return (Context.EAGER, None) if isinstance(comp.operator, cst.NotEqual) else (None, Context.EAGER)


def _placement_of(fn: FunctionInfo, expr: cst.BaseExpression) -> bool:
    """`module.device`, `next(module.parameters()).device`, or a local bound once from such."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "device":
        return True
    if isinstance(expr, cst.Name):
        values = [a.value for a in fn.assignments if any(isinstance(t, cst.Name) and t.value == expr.value for t in a.targets)]
        return len(values) == 1 and isinstance(values[0], cst.Attribute) and values[0].attr.value == "device"
    return False


def _names_a_device(expr: cst.BaseExpression) -> bool:
    """`self.execution_device`, `onload_device`, `device`: where the code places things."""
    name = (dotted_name(expr) or "").rsplit(".", 1)[-1] if isinstance(expr, cst.Name | cst.Attribute) else ""
    return name != "device" and name.endswith("_device")


def _cpu_tensor_flag(expr: cst.BaseExpression, fn: FunctionInfo | None) -> bool:
    """`use_cpu` bound once, from `t.device.type == "cpu"`."""
    if fn is None or not isinstance(expr, cst.Name):
        return False
    values = [a.value for a in fn.assignments if any(isinstance(t, cst.Name) and t.value == expr.value for t in a.targets)]
    return len(values) == 1 and values[0] is not None and _tests_cpu_tensor(values[0])


def _is_none_literal(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def module_level_assigns(module: cst.Module) -> Iterator[cst.Assign]:
    """Assignments run at module level: top-level ones and those in module-level `if`, `try`,
    `with`, `for` blocks (`if torch.cuda.is_available(): _STREAM = torch.cuda.Stream()`), not
    inside functions or classes."""
    stack: list[cst.CSTNode] = list(reversed(module.body))
    while stack:
        node = stack.pop()
        node_type = type(node)
        if node_type is cst.SimpleStatementLine or node_type is cst.SimpleStatementSuite:
            for small in cast(cst.SimpleStatementLine, node).body:
                if type(small) is cst.Assign:
                    yield cast(cst.Assign, small)
                elif type(small) is cst.AnnAssign and cast(cst.AnnAssign, small).value is not None:
                    # `_SLOTS: dict = {}`: read as the plain assignment it makes (same value node)
                    annotated = cast(cst.AnnAssign, small)
                    yield cst.Assign(targets=[cst.AssignTarget(annotated.target)], value=cast(cst.BaseExpression, annotated.value))
        elif node_type not in SCOPE_TYPES and may_hold_statements(node_type):
            stack.extend(reversed(child_nodes(node)))


def _all_params(params: cst.Parameters) -> Iterator[cst.Param]:
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg
    if params.star_kwarg is not None:
        yield params.star_kwarg


# exact types, compared with `type(x) in`: isinstance against libcst's ABCs is slow
# what a parameter learns from its callers (pageable host tensors are not handed down: a caller
# that passes one may be the exception among callers this module does not show)
_HANDED_DOWN_KINDS = frozenset({Kind.STREAM, Kind.EVENT, Kind.PINNED_HOST})
_BINDING_TYPES = frozenset({cst.Assign, cst.AnnAssign, cst.With, cst.Call, cst.Nonlocal, cst.Global, cst.Return})


def _run_once_test(test: cst.BaseExpression, fn: FunctionInfo) -> bool:
    """`if not self.done:` / `if self.buf is None:` where `fn` itself sets the attribute (to a
    value that is not None/False) and no method but `__init__` clears it: the body runs once, on
    the first call - the eager warm-up that precedes every capture."""
    attr = None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        attr = self_attribute(test.expression)
    elif isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comp = test.comparisons[0]
        if isinstance(comp.operator, cst.Is) and _is_none_literal(comp.comparator):
            attr = self_attribute(test.left)
    if attr is None or fn.cls is None or fn.cls.made_per_call:
        return False
    sets = False
    for method, value in attribute_stores(fn.cls, attr):
        if value is None:
            return False  # `kw, self.kw = self.kw, None`: a hand-off, not a one-time set-up
        if falsy_literal(value):
            if method.name != "__init__":
                return False  # reset per call (`self.kw = None` after its use)
        elif method is fn:
            sets = True
    return sets


def attribute_stores(cls: ClassInfo, attr: str) -> list[tuple[FunctionInfo, cst.BaseExpression | None]]:
    """Each `self.<attr> = value` in the class's methods, with the method (value None: stored by
    unpacking, `a, self.x = ...`); indexed once per class."""
    if cls.attr_stores is None:
        cls.attr_stores = _attr_stores(cls)
    return cls.attr_stores.get(attr, [])


def _attr_stores(cls: ClassInfo) -> dict[str, list[tuple[FunctionInfo, cst.BaseExpression | None]]]:
    index: dict[str, list[tuple[FunctionInfo, cst.BaseExpression | None]]] = {}
    for method in cls.methods.values():
        for node in method.binding_nodes or ():
            if type(node) is not cst.Assign:
                continue
            assign = cast(cst.Assign, node)
            for target in assign.targets:
                attr = self_attribute(target.target)
                if attr is not None:
                    index.setdefault(attr, []).append((method, assign.value))
                elif isinstance(target.target, cst.Tuple | cst.List):
                    for element in target.target.elements:
                        unpacked = self_attribute(element.value)
                        if unpacked is not None:
                            index.setdefault(unpacked, []).append((method, None))
    return index


def _accelerator_receiver(call: cst.Call) -> tuple[str, bool] | None:
    """(`x`, False) for `x.current_stream()` / `self.x.Event()`; (`f`, True) for `f().Stream()`."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ACCELERATOR_METHODS:
        return None
    receiver = func.value
    if isinstance(receiver, cst.Call):
        name = dotted_name(receiver.func) if not receiver.args else None
        return (name, True) if name is not None else None
    name = dotted_name(receiver)
    return (name, False) if name is not None else None


def _project_call(value: cst.BaseExpression, resolver: NameResolver) -> bool:
    """A call of something that is not torch's (a torch call's result is typed by the oracle)."""
    if not isinstance(value, cst.Call):
        return False
    q = resolver.qualname(value.func)
    return q is None or not (q == "torch" or q.startswith("torch."))


def _chain_root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`x` for `x.cpu().numpy()[0]`: what a chain of calls, attributes and subscripts starts from
    (`self.x` stays whole)."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript) or (isinstance(expr, cst.Attribute) and self_attribute(expr) is None):
            expr = expr.value
        else:
            return expr


def _same_target(target: cst.BaseExpression, other: cst.BaseExpression) -> bool:
    if isinstance(target, cst.Name) and isinstance(other, cst.Name):
        return target.value == other.value
    attr = self_attribute(target)
    return attr is not None and attr == self_attribute(other)

