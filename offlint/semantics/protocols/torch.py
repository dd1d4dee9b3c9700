"""What PyTorch's API does to the objects the core tracks, by dotted name. Data only.

Names are folded to one spelling first (`canonical`): `torch.Stream`, `torch.cuda.streams.Stream`
and `torch.xpu.Stream` all make a stream; `torch.accelerator.current_stream` is the current stream.
"""

from __future__ import annotations

# device modules whose stream/event/graph API mirrors torch.cuda's
_DEVICE_MODULES = ("torch.cuda.streams.", "torch.cuda.graphs.", "torch.xpu.", "torch.accelerator.", "torch.mtia.")

# what a call of the API makes: an abstract object kind (heap.py)
MAKES: dict[str, str] = {
    "torch.cuda.Stream": "stream",
    "torch.cuda.ExternalStream": "stream",
    "torch.cuda.Event": "event",
    "torch.cuda.current_stream": "current-stream",
    "torch.cuda.default_stream": "default-stream",
    "torch.cuda.stream": "stream-context",
    "torch.cuda.StreamContext": "stream-context",
    "torch.cuda.graph": "graph-context",
    "torch.cuda.CUDAGraph": "graph",
    "torch.cuda.is_current_stream_capturing": "capture-flag",
    "torch.cuda.make_graphed_callables": "graphed",
    "torch.compile": "compiled",
    "torch.cuda.set_stream": "set-stream",
    "functools.partial": "partial",
    "functools.wraps": "wraps",
    "functools.update_wrapper": "update-wrapper",
    "functools.lru_cache": "identity-decorator",
    "functools.cache": "identity-decorator",
    "contextlib.contextmanager": "contextmanager",
    "builtins.property": "property",
    "builtins.staticmethod": "staticmethod",
    "builtins.classmethod": "classmethod",
    "builtins.getattr": "getattr",
    "builtins.setattr": "setattr",
    "builtins.super": "super",
    "builtins.iter": "elements",
    "builtins.next": "elements",
    "builtins.list": "container",
    "builtins.tuple": "container",
    "builtins.dict": "container",
    "builtins.reversed": "container",
    "builtins.sorted": "container",
    "builtins.enumerate": "pairs",
    "builtins.zip": "pairs",
    "threading.Thread": "thread",
    "weakref.ref": "weakref",
    "weakref.proxy": "identity-decorator",
    "weakref.WeakMethod": "weakref",
    "torch.get_device_module": "device-module",
}

# calls that make a tensor: where it lives follows from `device=` / `pin_memory=`
TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "empty", "zeros", "ones", "full", "rand", "randn", "randint", "tensor", "as_tensor", "arange",
        "empty_like", "zeros_like", "ones_like", "full_like", "empty_strided", "from_numpy", "stack", "cat",
    )
)

# the classes whose subclasses' instances run `forward` (and hooks) when called
MODULE_BASES = ("torch.nn.Module",)
# the classes whose `apply` runs `forward`
AUTOGRAD_FUNCTION_BASES = ("torch.autograd.Function", "torch.autograd.function.Function")

# methods of stream, event and stream-context objects that order work or sync the host
STREAM_METHODS = frozenset(
    {"wait_stream", "wait_event", "record_event", "record", "wait", "synchronize", "query", "elapsed_time"}
)
# methods that name the stream protocol whatever the receiver is (duck-typed streams and events)
STREAM_PROTOCOL_METHODS = frozenset({"wait_stream", "wait_event", "record_event", "record_stream"})
# tensor methods that copy to the device; `copy_` copies its argument into the receiver
TO_DEVICE_METHODS = frozenset({"to", "cuda", "copy_", "non_blocking_copy"})
# tensor methods that make a host tensor
TO_HOST_METHODS = frozenset({"cpu", "numpy"})
PIN_METHODS = frozenset({"pin_memory"})
# graph methods that open and close a capture region
CAPTURE_BEGIN, CAPTURE_END = "capture_begin", "capture_end"
# methods of module objects that register hooks run around their forward (pre, post)
PRE_HOOK_REGISTRARS = frozenset({"register_forward_pre_hook"})
POST_HOOK_REGISTRARS = frozenset({"register_forward_hook"})
GLOBAL_PRE_HOOK_REGISTRARS = frozenset(
    {"torch.nn.modules.module.register_module_forward_pre_hook", "torch.nn.register_module_forward_pre_hook"}
)
GLOBAL_POST_HOOK_REGISTRARS = frozenset(
    {"torch.nn.modules.module.register_module_forward_hook", "torch.nn.register_module_forward_hook"}
)
# methods an executor runs its first argument with, on another thread
EXECUTOR_METHODS = frozenset({"submit", "map"})


def canonical(name: str) -> str:
    """One spelling per API: `torch.Stream` -> `torch.cuda.Stream`."""
    for prefix in _DEVICE_MODULES:
        if name.startswith(prefix):
            return "torch.cuda." + name[len(prefix):]
    if name in ("torch.Stream", "torch.Event"):
        return "torch.cuda." + name[6:]
    if name.startswith("torch.nn.modules.") and name.count(".") == 4 and name.rsplit(".", 1)[1][:1].isupper():
        return "torch.nn." + name.rsplit(".", 1)[1]  # torch.nn.modules.linear.Linear
    return name


def is_module_class(name: str) -> bool:
    """`torch.nn.Module` and the library's layers (`torch.nn.Linear`): calling an instance runs
    its hooks and forward."""
    name = canonical(name)
    return name in MODULE_BASES or (name.startswith("torch.nn.") and name.rsplit(".", 1)[1][:1].isupper())


# Words a file must hold for the core to lower it as a starting point of the slice (the rest of
# the slice is what those files import, and the files that import them and define a forward):
# the objects the core tracks are made, entered, waited on or pinned there, or a class derives
# from an engine interface (`engines.py` adds its base names).
SLICE_WORDS = (
    r"Stream\(|Event\(|current_stream|default_stream|\bgraph\(|CUDAGraph|capture_begin|pin_memory"
    r"|is_current_stream_capturing|register_forward|register_module_forward|record_stream|wait_stream"
    r"|wait_event|make_graphed_callables|\.forward\s*=|autograd\.Function|\.stream\(|set_stream"
    r"|get_device_module|\.cpu\(|to\(\s*['\"]cpu"
)


# DeepSpeed's accelerator abstraction (`deepspeed.accelerator.get_accelerator()`), which DeepSpeed
# and its users call instead of torch.cuda: what its methods make, as torch's own calls would
ACCELERATORS = frozenset({"deepspeed.accelerator.get_accelerator", "deepspeed.accelerator.real_accelerator.get_accelerator"})
ACCELERATOR_MAKES: dict[str, str] = {
    "Stream": "stream",
    "Event": "event",
    "current_stream": "current-stream",
    "default_stream": "default-stream",
    "stream": "stream-context",
    "create_graph": "graph",
    "capture_to_graph": "graph-context",
}
# methods of an accelerator that replay a graph (a replay never runs inside a capture)
ACCELERATOR_REPLAYS = frozenset({"replay_graph"})
