"""The constraints of each instruction, and how a call resolves from its callee's objects.

Python's calling mechanisms, each one resolution rule: a function binds its parameters; a bound
method binds `self` first; a class makes an instance and runs `__init__` along its MRO; an
instance of an `nn.Module` runs its forward pre-hooks, `forward` (an installed `forward` on the
instance first) and forward hooks, any other instance its `__call__`; `Function.apply` runs
`forward`; a partial prepends its arguments; `contextmanager` functions run at the call and yield
to the `with`; `property` getters run at the load; decorators are calls made at definition; an
external API call makes the object the torch table says (`protocols/torch.py`). Every resolved
call is recorded with the rule that resolved it (`Heap.call_targets`).
"""

from __future__ import annotations

import dataclasses
import functools

from offlint.semantics.heap import BUILTIN_KINDS, CONTAINER_KINDS, Heap, Node, Obj
from offlint.semantics.lowered import Site, Unit
from offlint.semantics.protocols import torch as api


def apply(heap: Heap, unit: Unit, instruction: tuple) -> None:
    op = instruction[0]
    if op == "copy":
        heap.copy(instruction[1], instruction[2])
    elif op == "new":
        heap.add(instruction[1], [instruction[2]])
    elif op == "load":
        _, dst, src, attr = instruction
        heap.on(src, lambda obj: load(heap, dst, obj, attr, unit.id))
    elif op == "store":
        _, base, attr, src = instruction
        if attr == "forward":
            heap.installed.append(src)
        heap.on(base, lambda obj: store(heap, obj, attr, src))
    elif op == "eload":
        _, dst, src = instruction
        heap.on(src, lambda obj: element_load(heap, dst, obj))
    elif op == "estore":
        _, dst, src = instruction
        heap.on(dst, lambda obj: element_store(heap, obj, src))
    elif op == "call":
        _, site, dst = instruction
        if site.callee is not None:
            heap.on(site.callee, lambda obj: call(heap, site, dst, obj))
        # a tensor method that makes a host tensor does so whatever tensor it is called on
        if site.method in api.PIN_METHODS:
            heap.add(dst, [("host", site.id, True)])
        elif site.method in api.TO_HOST_METHODS or (site.method == "to" and _to_host(site)):
            heap.add(dst, [("host", site.id, False)])
    elif op == "with":
        _, site_id, context, target = instruction
        if context is not None:
            heap.on(context, lambda obj: enter(heap, heap.sites[site_id], target, obj))
    elif op == "import":
        _, dst, module, name = instruction
        heap.add(dst, [_imported(heap, dst, module, name)])
    elif op == "star":
        module = instruction[1]
        for name in heap.module_globals.get(module, ()):
            heap.copy(f"g:{unit.module}:{name}", f"g:{module}:{name}")
    elif op == "annotate":
        _, dst, src = instruction
        heap.on(src, lambda obj: _annotated(heap, dst, obj))
    elif op == "super":
        _, dst, cid, self_place = instruction
        heap.on(self_place, lambda obj: heap.add(dst, [("sup", cid, obj)]))
    elif op == "class":
        _, dst, cid, bases = instruction
        known = heap.class_bases.setdefault(cid, [])
        known.extend(b for b in bases if b not in known)
        heap.add(dst, [("cls", cid)])


def _imported(heap: Heap, dst: Node, module: str, name: str | None) -> Obj:
    if name is None:
        return ("mod", module) if module in heap.modules else ("api", module)
    dotted = f"{module}.{name}"
    if dotted in heap.modules:
        return ("mod", dotted)
    if module in heap.modules:
        heap.copy(dst, f"g:{module}:{name}")
        return ("api", f"<tree>.{dotted}")  # a name the module does not bind: nothing of ours
    return ("api", dotted)


def _annotated(heap: Heap, dst: Node, obj: Obj) -> None:
    if obj[0] == "cls":
        heap.add(dst, [("inst", obj[1])])
    elif obj[0] == "api":
        makes = api.MAKES.get(api.canonical(obj[1]))
        if makes == "stream":
            heap.add(dst, [("stream", f"annotation:{dst}")])
        elif makes == "event":
            heap.add(dst, [("event", f"annotation:{dst}", False, False)])
        elif api.is_module_class(obj[1]):
            heap.add(dst, [("apiinst", api.canonical(obj[1]), f"annotation:{dst}")])


# --- loads and stores ------------------------------------------------------------------------
def load(heap: Heap, dst: Node, obj: Obj, attr: str, origin: str | None = None) -> None:
    kind = obj[0]
    if kind == "mod":
        dotted = f"{obj[1]}.{attr}"
        if dotted in heap.modules:
            heap.add(dst, [("mod", dotted)])
        heap.copy(dst, f"g:{obj[1]}:{attr}")
    elif kind == "api":
        heap.add(dst, [("api", f"{obj[1]}.{attr}")])
    elif kind == "cls":
        cid = obj[1]
        if attr == "apply" and heap.is_autograd_function(cid):
            heap.add(dst, [("apply", cid)])
        for place in heap.class_attribute(cid, attr):
            heap.on(place, functools.partial(_bind_member_of, heap, dst, None, ("cls", cid), origin))
    elif kind == "inst":
        cid = obj[1]
        heap.copy(dst, ("f", obj, attr))
        for place in heap.class_attribute(cid, attr):
            heap.on(place, functools.partial(_bind_member_of, heap, dst, obj, ("cls", cid), origin))
        if heap.mro(cid)[1]:  # an external base (nn.Module): its methods are torch's
            heap.add(dst, [("meth", obj, attr)])
    elif kind == "sup":
        _, after, self_obj = obj
        if self_obj[0] == "inst":
            for place in heap.class_attribute(self_obj[1], attr, after=after):
                heap.on(place, lambda member: _bind_member(heap, dst, member, self_obj, ("cls", self_obj[1]), origin))
        elif self_obj[0] == "cls":
            for place in heap.class_attribute(self_obj[1], attr, after=after):
                heap.on(place, lambda member: _bind_member(heap, dst, member, None, self_obj))
    elif kind == "partial":
        heap.copy(dst, ("f", obj, attr))
    elif kind == "prop" and attr in ("setter", "getter", "deleter"):
        heap.add(dst, [("keep", obj)])
    elif kind in BUILTIN_KINDS:
        heap.add(dst, [("meth", obj, attr)])
        heap.copy(dst, ("f", obj, attr))


def _bind_member_of(heap: Heap, dst: Node, self_obj: Obj | None, owner: Obj, origin: str | None, member: Obj) -> None:
    _bind_member(heap, dst, member, self_obj, owner, origin)


def _call_unless_torch(heap: Heap, site: Site, dst: Node | None, how: str, member: Obj) -> None:
    if member[0] != "meth":  # torch's own method (`nn.Module.__call__`) runs nothing of ours
        call(heap, site, dst, member, how)


def _bind_member(heap: Heap, dst: Node, member: Obj, self_obj: Obj | None, owner: Obj, origin: str | None = None) -> None:
    kind = member[0]
    if kind == "fn":
        heap.add(dst, [("bound", member[1], self_obj)] if self_obj is not None else [member])
    elif kind == "static":
        heap.add(dst, [member[1]])
    elif kind == "classm":
        inner = member[1]
        if inner[0] == "fn":
            heap.add(dst, [("bound", inner[1], owner)])
    elif kind == "prop":
        if self_obj is None:
            heap.add(dst, [member])
        else:
            getter = heap.units.get(member[1])
            if getter is not None:
                site = _derived_site(heap, f"{member[1]}<get>", getter)
                _call_unit(heap, site, dst, getter, (self_obj,), "property")
                if origin is not None:  # the load runs the getter: an edge of the loading unit
                    heap.unit_edges.setdefault(origin, set()).add((member[1], "property"))
    else:
        heap.add(dst, [member])


def store(heap: Heap, obj: Obj, attr: str, src: Node) -> None:
    if obj[0] in ("mod", "cls", "inst", "partial", "apiinst") or obj[0] in BUILTIN_KINDS:
        heap.copy(heap.field(obj, attr), src)


def element_load(heap: Heap, dst: Node, obj: Obj) -> None:
    kind = obj[0]
    if kind in CONTAINER_KINDS or kind in ("apiinst", "inst"):
        heap.copy(dst, ("e", obj))
    if kind == "gen":
        heap.copy(dst, f"y:{obj[1]}")
    elif kind not in CONTAINER_KINDS and (kind in BUILTIN_KINDS or kind in ("inst", "fn", "bound")):
        # unpacking a value that is no container (a pair's parts, `for i, x in enumerate(xs)`):
        # the value itself, so what a loop hands on is never lost
        heap.add(dst, [obj])


def element_store(heap: Heap, obj: Obj, src: Node) -> None:
    if obj[0] in CONTAINER_KINDS or obj[0] in ("apiinst", "inst"):
        heap.copy(("e", obj), src)


# --- calls -----------------------------------------------------------------------------------
def _derived_site(heap: Heap, site_id: str, unit: Unit) -> Site:
    return Site(site_id, unit.id, unit.line, 0, None)


def record(heap: Heap, site: Site, unit_id: str, how: str) -> None:
    heap.call_targets.setdefault(site.id, set()).add((unit_id, how))


def _call_unit(heap: Heap, site: Site, dst: Node | None, unit: Unit, prefix: tuple[Obj, ...], how: str, args: tuple[Node | None, ...] | None = None) -> None:
    """Bind a call's arguments to `unit`'s parameters; `prefix`: objects bound first (self)."""
    record(heap, site, unit.id, how)
    params = unit.params
    for index, obj in enumerate(prefix):
        if index < len(params):
            heap.add(params[index], [obj])
    given = site.args if args is None else args
    offset = len(prefix)
    for index, arg in enumerate(given):
        position = index + offset
        if arg is None:
            continue
        if position < len(params):
            heap.copy(params[position], arg)
        elif unit.vararg is not None:
            holder = ("container", "*args", unit.id)
            heap.add(unit.vararg, [holder])
            heap.copy(("e", holder), arg)
    if site.star is not None:
        star = site.star
        for position in range(len(given) + offset, len(params)):
            heap.on(star, functools.partial(element_load, heap, params[position]))
        if unit.vararg is not None:
            heap.copy(unit.vararg, star)
    names = dict(zip(unit.param_names, params + unit.kwonly, strict=False))
    for name, value in site.kwargs:
        if value is None:
            continue
        target = names.get(name)
        if target is not None:
            heap.copy(target, value)
        elif unit.kwarg is not None:
            holder = ("container", "**kwargs", unit.id)
            heap.add(unit.kwarg, [holder])
            heap.copy(("e", holder), value)
    if site.starstar is not None:
        for target in list(params[len(given) + offset:]) + list(unit.kwonly):
            heap.on(site.starstar, functools.partial(element_load, heap, target))
        if unit.kwarg is not None:
            heap.copy(unit.kwarg, site.starstar)
    if dst is not None:
        heap.copy(dst, f"r:{unit.id}")
        if unit.generator:  # known from the lowering: not a scan of the body per call bound
            heap.add(dst, [("gen", unit.id)])


def call(heap: Heap, site: Site, dst: Node | None, obj: Obj, how: str = "") -> None:
    kind = obj[0]
    if kind == "fn":
        unit = heap.units.get(obj[1])
        if unit is not None:
            _call_unit(heap, site, dst, unit, (), how or "function")
    elif kind == "bound":
        unit = heap.units.get(obj[1])
        if unit is not None and obj[2] is not None:
            _call_unit(heap, site, dst, unit, (obj[2],), how or "bound method")
    elif kind == "cls":
        cid = obj[1]
        instance: Obj = ("inst", cid)
        heap.add(dst, [instance])
        for place in heap.class_attribute(cid, "__init__"):
            heap.on(place, lambda member: _init(heap, site, member, instance))
    elif kind == "inst":
        _call_instance(heap, site, dst, obj)
    elif kind == "apiinst":
        _run_hooks(heap, site, dst, obj)
    elif kind == "apply":
        for place in heap.class_attribute(obj[1], "forward"):
            heap.on(place, lambda member: _apply(heap, site, dst, member))
    elif kind == "partial":
        _call_partial(heap, site, dst, obj)
    elif kind == "cmfactory":
        unit = heap.units.get(obj[1])
        if unit is not None:
            _call_unit(heap, site, None, unit, (), "context manager")
            heap.add(dst, [("cm", obj[1])])
    elif kind in ("identity", "keep"):
        if kind == "keep":
            heap.add(dst, [obj[1]])
        elif site.args and site.args[0] is not None:
            heap.copy(dst, site.args[0])
    elif kind == "static" or kind == "classm":
        call(heap, site, dst, obj[1], how)
    elif kind == "api":
        _call_api(heap, site, dst, obj[1])
    elif kind == "weakref":
        heap.copy(dst, ("f", obj, "target"))
    elif kind == "apicall":
        if site.decorator and site.args and site.args[0] is not None:
            heap.copy(dst, site.args[0])  # `@torch.no_grad()`: the function, unchanged
    elif kind == "meth":
        receiver = obj[1]
        if receiver[0] == "apicall" and receiver[1] in api.ACCELERATORS and obj[2] in api.ACCELERATOR_MAKES:
            # `get_accelerator().Stream()`: DeepSpeed's accelerator makes what torch.cuda would
            _call_api(heap, site, dst, "torch.cuda." + _ACCELERATOR_AS_TORCH[obj[2]])
        else:
            _call_method(heap, site, dst, receiver, obj[2])


_ACCELERATOR_AS_TORCH = {
    "Stream": "Stream", "Event": "Event", "current_stream": "current_stream", "default_stream": "default_stream",
    "stream": "stream", "create_graph": "CUDAGraph", "capture_to_graph": "graph",
}


def _init(heap: Heap, site: Site, member: Obj, instance: Obj) -> None:
    if member[0] == "fn":
        unit = heap.units.get(member[1])
        if unit is not None:
            _call_unit(heap, site, None, unit, (instance,), "constructor")


def _apply(heap: Heap, site: Site, dst: Node, member: Obj) -> None:
    target = member[1] if member[0] == "static" else member
    if target[0] == "fn":
        unit = heap.units.get(target[1])
        if unit is not None:
            _call_unit(heap, site, dst, unit, (("ctx",),), "autograd Function.apply")


def _call_instance(heap: Heap, site: Site, dst: Node, obj: Obj) -> None:
    cid = obj[1]
    if heap.is_module_class(cid):
        forward = ("t", site.id, cid, "forward")
        load(heap, forward, obj, "forward")
        heap.on(forward, lambda member: call(heap, site, dst, member, "module call (forward)") if member[0] != "meth" else None)
        _run_hooks(heap, site, dst, obj)
    else:
        method = ("t", site.id, cid, "__call__")
        load(heap, method, obj, "__call__")
        heap.on(method, lambda member: call(heap, site, dst, member, "__call__") if member[0] != "meth" else None)


def _run_hooks(heap: Heap, site: Site, dst: Node, obj: Obj) -> None:
    """A module call runs its forward pre-hooks (module, args) and forward hooks (module, args,
    output), its own and those registered for every module."""
    module = ("t", site.id, "module")
    heap.add(module, [obj])
    arguments = ("t", site.id, "args")
    holder = ("container", "args", site.id)
    heap.add(arguments, [holder])
    for arg in site.args:
        if arg is not None:
            heap.copy(("e", holder), arg)
    hook_site = dataclasses.replace(site, args=(module, arguments, dst), kwargs=(), star=None, starstar=None)
    for place in (("f", obj, "<prehooks>"), ("f", obj, "<hooks>"), "<module-prehooks>", "<module-hooks>"):
        heap.on(place, lambda hook: call(heap, hook_site, None, hook, "forward hook"))


def _call_partial(heap: Heap, site: Site, dst: Node, obj: Obj) -> None:
    # a partial of a partial binds once per (site, partial): `f = partial(f, x)` in a loop holds itself
    if (site.id, obj) in heap.partial_calls or len(heap.partial_calls) > 50_000:
        return
    heap.partial_calls.add((site.id, obj))
    count = heap.pts.get(("partial-args", obj), {("n", 0)})
    n = max(o[1] for o in count)
    bound_args = tuple(("f", obj, f"#{i}") for i in range(n))
    kwargs = tuple((name, ("f", obj, f"kw:{name}")) for name in heap.partial_keywords.get(obj, ())) + site.kwargs
    inner = dataclasses.replace(site, args=bound_args + site.args, kwargs=kwargs)
    heap.on(("f", obj, "func"), lambda target: call(heap, inner, dst, target, "functools.partial"))


def _call_api(heap: Heap, site: Site, dst: Node, dotted: str) -> None:
    name = api.canonical(dotted)
    makes = api.MAKES.get(name)
    first = site.args[0] if site.args else None
    if makes == "stream":
        heap.add(dst, [("stream", site.id)])
    elif makes == "event":
        heap.add(dst, [("event", site.id, site.literal("external") is True, site.literal("enable_timing") is True)])
    elif makes == "current-stream":
        heap.add(dst, [("current-stream",)])
    elif makes == "default-stream":
        heap.add(dst, [("default-stream",)])
    elif makes == "stream-context":
        context: Obj = ("stream-context", site.id)
        heap.add(dst, [context])
        stream = first if first is not None else dict(site.kwargs).get("stream")
        if stream is not None:
            heap.copy(("f", context, "stream"), stream)
    elif makes == "graph-context":
        heap.add(dst, [("graph-context", site.id)])
    elif makes == "graph":
        heap.add(dst, [("graph", site.id)])
    elif makes == "capture-flag":
        heap.add(dst, [("capture-flag",)])
    elif makes == "graphed":
        if first is not None:
            heap.copy(dst, first)
            heap.on(first, lambda obj: _graphed(heap, obj))
    elif makes in ("compiled", "identity-decorator", "update-wrapper"):
        if first is not None:
            heap.copy(dst, first)
        else:
            heap.add(dst, [("identity",)])
    elif makes == "wraps":
        heap.add(dst, [("identity",)])
    elif makes == "partial":
        partial: Obj = ("partial", site.id)
        heap.add(dst, [partial])
        if first is not None:
            heap.copy(("f", partial, "func"), first)
        rest = site.args[1:]
        heap.add(("partial-args", partial), [("n", len(rest))])
        for index, arg in enumerate(rest):
            if arg is not None:
                heap.copy(("f", partial, f"#{index}"), arg)
        heap.partial_keywords[partial] = tuple(name for name, _ in site.kwargs)
        for name, value in site.kwargs:
            if value is not None:
                heap.copy(("f", partial, f"kw:{name}"), value)
    elif makes == "contextmanager":
        if first is not None:
            heap.on(first, lambda obj: heap.add(dst, [("cmfactory", obj[1])]) if obj[0] == "fn" else None)
    elif makes == "property":
        if first is not None:
            heap.on(first, lambda obj: heap.add(dst, [("prop", obj[1])]) if obj[0] == "fn" else None)
    elif makes in ("staticmethod", "classmethod"):
        tag = "static" if makes == "staticmethod" else "classm"
        if first is not None:
            # `f = staticmethod(f)` in a class body feeds its own place: never wrap twice
            heap.on(first, lambda obj: heap.add(dst, [obj if obj[0] in ("static", "classm") else (tag, obj)]))
    elif makes == "elements":
        if first is not None:
            heap.on(first, lambda obj: element_load(heap, dst, obj))
    elif makes == "container":
        # `list(xs)`, `tuple(range(n))`: a new Python sequence holding xs' elements
        made: Obj = ("container", "builtin", site.id)
        heap.add(dst, [made])
        if first is not None:
            heap.on(first, functools.partial(element_load, heap, ("e", made)))
    elif makes == "pairs":
        for arg in site.args:
            if arg is not None:
                heap.copy(dst, arg)
    elif makes == "thread":
        target = dict(site.kwargs).get("target")
        if target is not None:
            heap.thread_targets.append((site, target))
    elif makes == "weakref":
        # `weakref.ref(obj)`: calling the reference gives the object back
        reference: Obj = ("weakref", site.id)
        heap.add(dst, [reference])
        if first is not None:
            heap.copy(("f", reference, "target"), first)
    elif makes == "device-module":
        heap.add(dst, [("api", "torch.cuda")])
    elif name in api.TENSOR_FACTORIES:
        tensor = _tensor(site, name)
        if tensor is not None:
            heap.add(dst, [tensor])
    elif name in api.GLOBAL_PRE_HOOK_REGISTRARS and first is not None:
        heap.copy("<module-prehooks>", first)
        heap.on(first, heap.hooks.add)
    elif name in api.GLOBAL_POST_HOOK_REGISTRARS and first is not None:
        heap.copy("<module-hooks>", first)
        heap.on(first, heap.hooks.add)
    elif name in ("torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential", "torch.nn.ParameterList"):
        holder: Obj = ("container", "module-list", site.id)
        heap.add(dst, [holder, ("apiinst", name, site.id)])
        for arg in site.args:
            if arg is not None:
                heap.on(arg, lambda obj: element_load(heap, ("e", holder), obj))
                heap.on(arg, lambda obj: element_load(heap, ("e", ("apiinst", name, site.id)), obj))
    elif api.is_module_class(name):
        heap.add(dst, [("apiinst", name, site.id)])
    elif site.decorator and first is not None:
        heap.copy(dst, first)  # an external decorator (`@torch.inference_mode()`): the function
    else:
        heap.add(dst, [("apicall", name)])


def _tensor(site: Site, name: str) -> Obj | None:
    device = site.literal("device")
    if site.literal("pin_memory") is True:
        return ("host", site.id, True)
    if isinstance(device, str):
        return ("host", site.id, False) if device.startswith("cpu") else ("device", site.id)
    if name.endswith("_like") or name in ("torch.stack", "torch.cat"):
        return None
    if dict(site.kwargs).get("device") is None:
        return ("host", site.id, False)
    return None


def _graphed(heap: Heap, obj: Obj) -> None:
    if obj[0] == "container":
        heap.on(("e", obj), lambda inner: _graphed(heap, inner))
    else:
        heap.graphed.add(obj)


def _call_method(heap: Heap, site: Site, dst: Node, receiver: Obj, name: str) -> None:
    kind = receiver[0]
    first = site.args[0] if site.args else None
    if name in api.PRE_HOOK_REGISTRARS | api.POST_HOOK_REGISTRARS and first is not None:
        slot = "<prehooks>" if name in api.PRE_HOOK_REGISTRARS else "<hooks>"
        heap.copy(("f", receiver, slot), first)
        heap.on(first, heap.hooks.add)
        return
    if kind in ("stream", "current-stream", "default-stream") and name == "record_event":
        heap.add(dst, [("event", site.id, False, False)])
    elif kind in ("host", "device", "apicall", "inst", "apiinst"):
        if name in api.PIN_METHODS:
            heap.add(dst, [("host", site.id, True)])
        elif name in api.TO_HOST_METHODS or (name == "to" and _to_host(site)):
            heap.add(dst, [("host", site.id, site.literal("non_blocking") is True and kind == "device")])
        elif name in ("to", "cuda") and kind in ("host", "device"):
            heap.add(dst, [("device", site.id)])
        elif name == "copy_":
            heap.add(dst, [receiver])
    elif kind == "container":
        if name in ("get", "pop", "setdefault", "popitem", "__getitem__", "popleft"):
            heap.copy(dst, ("e", receiver))
        elif name in ("values", "items", "keys", "copy"):
            heap.add(dst, [receiver])
        if name in ("append", "add", "insert", "appendleft", "setdefault", "__setitem__"):
            value = site.args[-1] if site.args else None
            if value is not None:
                heap.copy(("e", receiver), value)
        elif name in ("extend", "update") and first is not None:
            heap.on(first, lambda obj: element_load(heap, ("e", receiver), obj))
    elif kind == "thread" and name == "start":
        pass
    if name in api.EXECUTOR_METHODS and first is not None:
        heap.thread_targets.append((site, first))


def _to_host(site: Site) -> bool:
    device = site.literal("0")
    if device is not None and isinstance(device, str):
        return device.startswith("cpu")
    device = site.literal("device")
    return isinstance(device, str) and device.startswith("cpu")


def enter(heap: Heap, site: Site, target: Node, obj: Obj) -> None:
    """`with obj as target:` runs `__enter__` and `__exit__`; a contextmanager's generator ran
    at its call and hands the `with` what it yields."""
    kind = obj[0]
    if kind == "inst":
        for attr in ("__enter__", "__exit__"):
            method = ("t", site.id, attr)
            load(heap, method, obj, attr)
            heap.on(method, functools.partial(_call_unless_torch, heap, site, target if attr == "__enter__" else None, f"with ({attr})"))
    elif kind == "cm":
        heap.copy(target, f"y:{obj[1]}")
    else:
        heap.add(target, [obj])
