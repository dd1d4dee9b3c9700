"""What a value is, as far as capture safety cares: a stream, an event, a pinned host tensor...

Light, flow-insensitive type tracking. Evidence is taken in this order: constructors and
factory calls (`torch.cuda.Stream()`, `torch.empty(..., pin_memory=True)`, `.pin_memory()`,
`.to("cuda")`), annotations, then - only as a last resort, and only in a module that imports
torch - names (`*_stream`, `*_event`). Name-based guesses are marked `guessed` so rules that
must not guess can refuse them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from offlint.analysis.imports import NameResolver, dotted_name
from offlint.analysis.torch_api import (
    EVENT_CONSTRUCTORS,
    GRAPH_CONSTRUCTORS,
    STREAM_CONSTRUCTORS,
)


class Kind(enum.Enum):
    STREAM = "stream"
    EVENT = "event"
    GRAPH = "cuda-graph"
    PINNED_HOST = "pinned host tensor"
    PAGEABLE_HOST = "pageable host tensor"
    HOST_TENSOR = "host tensor"  # pinned on one path, pageable on another
    DEVICE_TENSOR = "device tensor"
    TENSOR = "tensor"  # a torch tensor whose placement is unknown
    NOT_TORCH = "not a torch object"  # threading.Event, numpy arrays, Popen, ...
    UNKNOWN = "unknown"

    @property
    def is_tensor(self) -> bool:
        return self in (Kind.PINNED_HOST, Kind.PAGEABLE_HOST, Kind.HOST_TENSOR, Kind.DEVICE_TENSOR, Kind.TENSOR)

    @property
    def is_host_tensor(self) -> bool:
        return self in (Kind.PINNED_HOST, Kind.PAGEABLE_HOST, Kind.HOST_TENSOR)


@dataclass(frozen=True)
class Typed:
    kind: Kind
    guessed: bool = False  # True when only the name suggested the kind

    @property
    def known(self) -> bool:
        return self.kind is not Kind.UNKNOWN and not self.guessed


UNKNOWN = Typed(Kind.UNKNOWN)

_TENSOR_FACTORIES = frozenset(
    {
        "torch.empty",
        "torch.zeros",
        "torch.ones",
        "torch.full",
        "torch.rand",
        "torch.randn",
        "torch.randint",
        "torch.arange",
        "torch.tensor",
        "torch.as_tensor",
        "torch.from_numpy",
        "torch.empty_strided",
        "torch.cat",
        "torch.stack",
    }
)
# factories whose result lives where their input does
_FOLLOWS_INPUT = frozenset({"torch.cat", "torch.stack", "torch.as_tensor"})
# reductions whose result is a new tensor where their first argument is
_REDUCTIONS = frozenset(
    {"torch.sum", "torch.max", "torch.min", "torch.amax", "torch.amin", "torch.mean", "torch.prod"}
    | {"torch.any", "torch.all", "torch.argmax", "torch.argmin", "torch.cumsum", "torch.count_nonzero"}
)
_PY_DATA = (cst.List, cst.Tuple, cst.ListComp, cst.Integer, cst.Float)
_LIKE_FACTORIES = frozenset(
    {"torch.empty_like", "torch.zeros_like", "torch.ones_like", "torch.full_like", "torch.rand_like", "torch.randn_like"}
)
_NOT_TORCH_PREFIXES = (
    "threading.",
    "multiprocessing.",
    "asyncio.",
    "subprocess.",
    "numpy.",
    "queue.",
    "concurrent.",
)
_DEVICE_METHODS = frozenset({"cuda"})
# tensor methods whose result is a view of the receiver: same device, same pinning
_VIEW_METHODS = frozenset({"contiguous", "view", "reshape", "detach", "t", "narrow", "flatten", "squeeze", "unsqueeze"})
# tensor methods that make a new tensor where the receiver is (on the host: pageable)
_SAME_DEVICE_METHODS = frozenset(
    {"clone", "sum", "max", "min", "amax", "amin", "mean", "prod", "any", "all", "argmax", "argmin", "cumsum"}
    | {"abs", "float", "double", "half", "int", "long", "bool"}
)
# container methods that hand out one of the container's elements
_ELEMENT_GETTERS = frozenset({"pop", "get", "popleft", "setdefault"})
# methods whose result is never a torch object: a numpy array, a list, a Python number
_NON_TORCH_RESULTS = frozenset({"numpy", "tolist", "item"})


def _made_where(source: Typed) -> Typed:
    """A new tensor computed from `source`: on its device; on the host it is pageable (a fresh
    allocation is never pinned)."""
    if source.kind.is_host_tensor:
        return Typed(Kind.PAGEABLE_HOST, source.guessed)
    return source if source.kind.is_tensor else UNKNOWN


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def is_true(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def _pinning_unknown(call: cst.Call) -> bool:
    """`pin_memory=` given but not a literal True/False (`pin_memory=pin`)."""
    pin = keyword(call, "pin_memory")
    return pin is not None and not (isinstance(pin, cst.Name) and pin.value in ("True", "False"))


def names_cuda_device(expr: cst.BaseExpression | None, resolver: NameResolver) -> bool:
    """True for `"cuda"`, `"cuda:0"`, `torch.device("cuda")`, `device=torch.cuda.current_device()`
    and names that plainly hold a device (`device`, `self.device`, `*_device`)."""
    if expr is None:
        return False
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value.startswith("cuda") if isinstance(expr.evaluated_value, str) else False
    if isinstance(expr, cst.FormattedString):  # f"cuda:{rank}"
        first = expr.parts[0] if expr.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda")
    if isinstance(expr, cst.Call):
        q = resolver.qualname(expr.func)
        if q == "torch.device" and expr.args:
            return names_cuda_device(expr.args[0].value, resolver)
        return q in ("torch.cuda.current_device",)
    if isinstance(expr, cst.Integer):
        return True  # `.to(0)`, `device=0`: a CUDA ordinal
    dotted = dotted_name(expr)
    if dotted is not None:
        last = dotted.split(".")[-1]
        return last not in HOST_DEVICE_NAMES and (
            last in ("device", "dev", "gpu")
            or last.endswith(("_device", "_dev", "_gpu"))
        )
    return False


# names the offloaders give the host side (diffusers' and accelerate's `offload_device`)
HOST_DEVICE_NAMES = frozenset({"offload_device", "cpu_device", "host_device"})


def names_cpu_device(expr: cst.BaseExpression | None) -> bool:
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "cpu"
    return False


class KindOracle:
    """Answers `kind_of(expr)` given the bindings visible at a point (locals, self attributes,
    module globals). Bindings are filled by the model builder."""

    def __init__(self, resolver: NameResolver, module_has_torch: bool) -> None:
        self.resolver = resolver
        self.module_has_torch = module_has_torch
        self.globals: dict[str, Typed] = {}
        # what the module's own functions return, by name (`get_side_stream()` -> a stream)
        self.returns: dict[str, Typed] = {}

    def of_call(self, call: cst.Call, lookup: Lookup) -> Typed:
        q = self.resolver.qualname(call.func)
        if q is not None:
            if q in STREAM_CONSTRUCTORS:
                return Typed(Kind.STREAM)
            if q in EVENT_CONSTRUCTORS:
                return Typed(Kind.EVENT)
            if q in GRAPH_CONSTRUCTORS:
                return Typed(Kind.GRAPH)
            if q in _FOLLOWS_INPUT and keyword(call, "device") is None:
                # `torch.cat(parts)` is where its inputs are; `torch.as_tensor(t)` too, unless t
                # is Python data (then it is made on the host)
                data = call.args[0].value if call.args else None
                if q != "torch.as_tensor" or not isinstance(data, _PY_DATA):
                    return Typed(Kind.TENSOR)
            if q in _REDUCTIONS and call.args and call.args[0].keyword is None:
                return _made_where(self.of(call.args[0].value, lookup))
            if q in _TENSOR_FACTORIES:
                if is_true(keyword(call, "pin_memory")):
                    return Typed(Kind.PINNED_HOST)
                device = keyword(call, "device")
                if _pinning_unknown(call):
                    # `pin_memory=flag`: pinned or not as the flag is at run time; on the host
                    # unless a device is named
                    return Typed(Kind.HOST_TENSOR if device is None or names_cpu_device(device) else Kind.TENSOR)
                if names_cuda_device(device, self.resolver):
                    return Typed(Kind.DEVICE_TENSOR)
                if device is None or names_cpu_device(device):
                    return Typed(Kind.PAGEABLE_HOST)
                return Typed(Kind.TENSOR)
            if q in _LIKE_FACTORIES:
                if is_true(keyword(call, "pin_memory")):
                    return Typed(Kind.PINNED_HOST)
                device = keyword(call, "device")
                if names_cuda_device(device, self.resolver):
                    return Typed(Kind.DEVICE_TENSOR)
                if call.args and device is None:
                    inner = self.of(call.args[0].value, lookup)
                    return inner if inner.kind.is_tensor else Typed(Kind.TENSOR)
                return Typed(Kind.TENSOR)
            if q.startswith(_NOT_TORCH_PREFIXES):
                return Typed(Kind.NOT_TORCH)
        elif isinstance(call.func, cst.Name):
            returned = self.returns.get(call.func.value)
            if returned is not None and lookup(call.func) is None:  # not shadowed by a local
                return returned
        if isinstance(call.func, cst.Attribute):
            method = call.func.attr.value
            own = lookup.method_returns.get(method) if self_attribute(call.func) is not None else None
            if own is not None:
                return own  # `self._get_stats(name)`: what that method of the class returns
            if method in _NON_TORCH_RESULTS:
                return Typed(Kind.NOT_TORCH)
            if method in _ELEMENT_GETTERS:
                # `self.ready.pop(i, None)`, `events.get(k)`: an element of a typed container
                element = lookup.element(call.func.value)
                if element is not None and element.kind is not Kind.UNKNOWN:
                    return element
            # typed once: every branch below is about the receiver (a chain is typed once per link)
            receiver = self.of(call.func.value, lookup)
            if receiver.kind is Kind.NOT_TORCH:
                return Typed(Kind.NOT_TORCH)  # `arr.sum()` on a numpy array, `q.get()` on a queue
            if method == "pin_memory":
                return Typed(Kind.PINNED_HOST)
            if method in _DEVICE_METHODS:
                return Typed(Kind.DEVICE_TENSOR)
            if method == "to":
                target = keyword(call, "device")
                if target is None and call.args and call.args[0].keyword is None:
                    target = call.args[0].value
                if names_cuda_device(target, self.resolver):
                    return Typed(Kind.DEVICE_TENSOR)
                if not names_cpu_device(target):
                    return receiver if receiver.kind.is_tensor else UNKNOWN
            if method in ("cpu", "to"):
                # a host tensor's .cpu() / .to("cpu") is itself; anything else is copied to the host
                return Typed(receiver.kind) if receiver.kind.is_host_tensor else Typed(Kind.PAGEABLE_HOST)
            if method in _VIEW_METHODS:
                return receiver if receiver.kind.is_tensor else UNKNOWN
            if method in _SAME_DEVICE_METHODS:
                return _made_where(receiver)
            if method in ("record_event",):
                return Typed(Kind.EVENT)
        return UNKNOWN

    def of(self, expr: cst.BaseExpression, lookup: Lookup) -> Typed:
        if isinstance(expr, cst.Call):
            return self.of_call(expr, lookup)
        if isinstance(expr, cst.Name | cst.Attribute):
            found = lookup(expr)
            if found is not None and found.kind is Kind.UNKNOWN:
                # bound to something untyped (`lens_cpu = meta.get_lens_cpu()`): a host-copy
                # name still tells (stream and event names do not override a binding)
                guess = self.guess_from_name(expr)
                return guess if guess.kind.is_host_tensor else found
            if found is not None:
                return found
            q = self.resolver.qualname(expr)
            if q is not None and q.startswith(_NOT_TORCH_PREFIXES):
                return Typed(Kind.NOT_TORCH)
            return self.guess_from_name(expr)
        if isinstance(expr, cst.Subscript):
            element = lookup.element(expr.value)
            if element is not None:
                return element
            indexed = self.of(expr.value, lookup)
            # indexing a tensor gives a view of its memory (same device, same pinning); indexing
            # a numpy array, a list or a Python number's result stays outside torch
            if indexed.kind.is_tensor or indexed.kind is Kind.NOT_TORCH:
                return Typed(indexed.kind, guessed=indexed.guessed)
            return UNKNOWN
        return UNKNOWN

    def of_annotation(self, annotation: cst.BaseExpression) -> Typed:
        optional = _optional_of(annotation, self.resolver)
        if optional is not None:
            # `Optional[torch.cuda.Stream]`, `torch.cuda.Stream | None`, `Union[torch.cuda.Stream,
            # torch.Stream, None]`: a stream (an event) when every member is one. Not a tensor:
            # `self.buf: torch.Tensor | None = None` says nothing of where the tensor assigned
            # later lives, and would blur what those assignments say
            kinds = {self.of_annotation(member) for member in optional}
            found = kinds.pop() if len(kinds) == 1 else UNKNOWN
            return found if found.kind in (Kind.STREAM, Kind.EVENT) else UNKNOWN
        q = self.resolver.qualname(annotation)
        if q in STREAM_CONSTRUCTORS:
            return Typed(Kind.STREAM)
        if q in EVENT_CONSTRUCTORS:
            return Typed(Kind.EVENT)
        if q == "torch.Tensor":
            return Typed(Kind.TENSOR)
        if q is not None and q.startswith(_NOT_TORCH_PREFIXES):
            return Typed(Kind.NOT_TORCH)
        return UNKNOWN

    def guess_from_name(self, expr: cst.BaseExpression) -> Typed:
        """Last resort: `*_stream` / `*_event` / `*_cpu` names, only in modules that import torch."""
        if not self.module_has_torch:
            return UNKNOWN
        dotted = dotted_name(expr)
        if dotted is None:
            return UNKNOWN
        last = dotted.split(".")[-1].lower().lstrip("_")
        if last == "stream" or last.endswith("_stream"):
            return Typed(Kind.STREAM, guessed=True)
        if last in ("event", "ev") or last.endswith("_event") or last.endswith("_ev"):
            return Typed(Kind.EVENT, guessed=True)
        # the inference engines' naming of host copies: `seq_lens_cpu`, `new_seq_lens_cpu_pinned`
        if last.endswith("_pinned") or last.startswith("pinned_") or ("pinned" in last and "cpu" in last):
            return Typed(Kind.PINNED_HOST, guessed=True)
        if last.endswith("_cpu") or last.startswith("cpu_"):
            return Typed(Kind.HOST_TENSOR, guessed=True)
        return UNKNOWN


def _optional_of(annotation: cst.BaseExpression, resolver: NameResolver) -> list[cst.BaseExpression] | None:
    """The members other than None of `Optional[X]`, `Union[X, Y, None]` and `X | Y | None`;
    None for any other annotation."""
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        members: list[cst.BaseExpression] = []
        for side in (annotation.left, annotation.right):
            inner = _optional_of(side, resolver)
            members.extend(inner if inner is not None else [side])
        return [m for m in members if not (isinstance(m, cst.Name) and m.value == "None")]
    if isinstance(annotation, cst.Subscript):
        q = resolver.qualname(annotation.value) or dotted_name(annotation.value)
        if q is None or q.rsplit(".", 1)[-1] not in ("Optional", "Union"):
            return None
        members = [
            e.slice.value
            for e in annotation.slice
            if isinstance(e.slice, cst.Index) and not (isinstance(e.slice.value, cst.Name) and e.slice.value.value == "None")
        ]
        return members or None
    return None


class Lookup:
    """Bindings visible inside one function: its locals, then `self.` attributes, then globals."""

    def __init__(
        self,
        local: Mapping[str, Typed],
        local_elements: Mapping[str, Typed],
        attrs: Mapping[str, Typed],
        attr_elements: Mapping[str, Typed],
        globals_: Mapping[str, Typed],
        method_returns: Mapping[str, Typed] | None = None,
        fields: Mapping[str, Typed] | None = None,
    ) -> None:
        self.local = local
        self.local_elements = local_elements
        self.attrs = attrs
        self.attr_elements = attr_elements
        self.globals = globals_
        self.method_returns: Mapping[str, Typed] = method_returns if method_returns is not None else {}
        # `slot.ready` on an object of unknown class: the stream or event every class of the
        # module that declares or sets that attribute agrees it is (`ready: torch.cuda.Event`)
        self.fields: Mapping[str, Typed] = fields if fields is not None else {}

    def __call__(self, expr: cst.BaseExpression) -> Typed | None:
        if isinstance(expr, cst.Name):
            return self.local.get(expr.value) or self.globals.get(expr.value)
        attr = self_attribute(expr)
        if attr is not None:
            return self.attrs.get(attr)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name | cst.Subscript):
            return self.fields.get(expr.attr.value)
        return None

    def element(self, container: cst.BaseExpression) -> Typed | None:
        if isinstance(container, cst.Name):
            return self.local_elements.get(container.value)
        attr = self_attribute(container)
        if attr is not None:
            return self.attr_elements.get(attr)
        return None


def self_attribute(expr: cst.BaseExpression) -> str | None:
    """`x` for `self.x` (the first parameter is assumed to be named `self`)."""
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == "self"
    ):
        return expr.attr.value
    return None


def join(a: Typed | None, b: Typed) -> Typed:
    """Combine two bindings of one name: agreement wins, known beats guessed/unknown."""
    if a is None or a.kind is Kind.UNKNOWN:
        return b
    if b.kind is Kind.UNKNOWN or a == b:
        return a
    if a.guessed and not b.guessed:
        return b
    if b.guessed and not a.guessed:
        return a
    if a.kind.is_host_tensor and b.kind.is_host_tensor:
        return Typed(Kind.HOST_TENSOR)  # on the host either way: no sync, no known pinning
    if a.kind.is_tensor and b.kind.is_tensor:
        return Typed(Kind.TENSOR)
    return UNKNOWN
