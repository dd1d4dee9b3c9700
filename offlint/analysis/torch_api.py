"""The PyTorch API surface the rules reason about, by canonical qualified name.

Qualified names are what `imports.NameResolver` produces: `tc.Event` after `import torch.cuda as
tc` becomes `torch.cuda.Event`. Aliases PyTorch itself exports (`torch.cuda.streams.Event`,
`torch.Event`) are folded into one canonical name by `canonical()`.
"""

from __future__ import annotations

import re

_ALIASES = {
    "torch.cuda.streams.Stream": "torch.cuda.Stream",
    "torch.cuda.streams.Event": "torch.cuda.Event",
    "torch.cuda.streams.ExternalStream": "torch.cuda.ExternalStream",
    "torch.Stream": "torch.cuda.Stream",
    "torch.Event": "torch.cuda.Event",
    "torch.cuda.graphs.graph": "torch.cuda.graph",
    "torch.cuda.graphs.CUDAGraph": "torch.cuda.CUDAGraph",
    "torch.cuda.graphs.is_current_stream_capturing": "torch.cuda.is_current_stream_capturing",
    "torch.cuda.graphs.make_graphed_callables": "torch.cuda.make_graphed_callables",
    "torch.accelerator.current_stream": "torch.cuda.current_stream",
    "torch.accelerator.synchronize": "torch.cuda.synchronize",
}


def canonical(qualname: str | None) -> str | None:
    if qualname is None:
        return None
    return _ALIASES.get(qualname, qualname)


STREAM_CONSTRUCTORS = frozenset(
    {
        "torch.cuda.Stream",
        "torch.cuda.ExternalStream",
        "torch.cuda.current_stream",
        "torch.cuda.default_stream",
    }
)
CURRENT_STREAM = frozenset({"torch.cuda.current_stream"})
EVENT_CONSTRUCTORS = frozenset({"torch.cuda.Event"})
STREAM_CONTEXTS = frozenset({"torch.cuda.stream", "torch.cuda.StreamContext"})
# calls that make a stream current until the next such call (`torch.cuda.set_stream(side)`)
STREAM_SWITCHES = frozenset({"torch.cuda.set_stream", "torch.accelerator.set_stream", "torch.set_stream"})
CAPTURE_TESTS = frozenset({"torch.cuda.is_current_stream_capturing"})
# true whenever a capture is under way: `is_available() and capturing` is as good as `capturing`
CAPTURE_IMPLIES = frozenset({"torch.cuda.is_available", "torch.cuda.is_initialized"})
# Capture tests imported from another module of the project, known by how the engines name them
# (`is_graph_capturing`, `_is_capturing`, SGLang's `get_is_capture_mode`, `is_device_stream_capturing`):
# a function's last name, outside torch. A same-module helper is recognised by its body instead
# (model.py); one imported under another name is not seen.
CAPTURE_PREDICATE_NAME = r"_*(?:get_)?(?:is|in)_\w*captur(?:e_mode|ing)|_*capturing"
_CAPTURE_PREDICATE = re.compile(CAPTURE_PREDICATE_NAME)


def is_imported_capture_predicate(qualname: str) -> bool:
    """`pkg.utils.is_graph_capturing`: a project helper that reports the capture state."""
    if qualname.startswith("torch."):
        return False
    return _CAPTURE_PREDICATE.fullmatch(qualname.rsplit(".", 1)[-1]) is not None


GRAPH_CONTEXTS = frozenset({"torch.cuda.graph"})
# segmented ("breakable") capture: SGLang's and vLLM's own context managers, matched by class name
SEGMENTED_GRAPH_CONTEXTS = frozenset({"BreakableCUDAGraphCapture"})
# functions these run eagerly between two captured segments (decorators, by last name)
EAGER_BREAK_DECORATORS = frozenset({"eager_on_graph", "eager_break_during_capture", "eager_boundary"})
GRAPHED_CALLABLES = frozenset({"torch.cuda.make_graphed_callables"})
GRAPH_CONSTRUCTORS = frozenset({"torch.cuda.CUDAGraph"})
DEVICE_SYNCS = frozenset({"torch.cuda.synchronize"})
COMPILE_DECORATORS = frozenset({"torch.compile"})
COMPILE_EXEMPT_DECORATORS = frozenset(
    {"torch.compiler.disable", "torch._dynamo.disable", "torch.library.custom_op"}
)

# methods that make an object "offloader-style" (catalogue: capture-reachable code)
STREAM_ORDERING_METHODS = frozenset({"wait_stream", "wait_event", "record_stream"})
# methods whose call blocks the host until the device is done
STREAM_SYNC_METHODS = frozenset({"synchronize", "query"})
EVENT_HOST_METHODS = frozenset({"synchronize", "query", "elapsed_time"})
TENSOR_HOST_SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})

# The prefilter's necessary condition for capture-reachable code (analysis/prefilter.py): every
# way model.py makes a function capture-reachable, or code a graph-capture region, needs one of
# these names in the file. Keep it in step with model.py (tests/test_parallel.py checks it).
# - APIs resolved through imports, by their last name (`tc.Stream`, `from torch.cuda import Event`);
#   aliases (`torch.Event`, `torch.accelerator.current_stream`) keep the last name:
CAPTURE_API_NAMES = frozenset(
    q.rsplit(".", 1)[1]
    for q in STREAM_CONSTRUCTORS | EVENT_CONSTRUCTORS | STREAM_CONTEXTS | STREAM_SWITCHES | CAPTURE_TESTS
    | GRAPH_CONTEXTS | GRAPH_CONSTRUCTORS | GRAPHED_CALLABLES
)
# an accelerator object of the project's own is known by these calls on it, whatever its name
# (`get_accelerator().Stream()`, `self.backend.current_stream()`: model.py's duck typing)
ACCELERATOR_METHODS = frozenset({"current_stream", "default_stream", "Stream", "Event"})
# - methods, whatever the receiver: stream ordering (offloader-style classes), `record_event()`
#   (an event), `capture_begin()` (a graph region), hook registration (installed hooks)
HOOK_REGISTRARS = frozenset(
    {
        "register_forward_pre_hook",
        "register_forward_hook",
        "register_full_backward_hook",
        "register_module_forward_pre_hook",
        "register_module_forward_hook",
    }
)
BACKWARD_HOOK_REGISTRARS = frozenset({"register_full_backward_hook"})
# Hook registration and `module.forward = wrapped` make code reachable only where an offloader
# installs them (model.py), which already needs one of the names above: they open no gate alone.
# The model-hook protocol's methods (accelerate's and diffusers' `ModelHook`) run inside the hooked
# module's forward whatever the class holds (reachability.py): their names open the gate.
MODEL_HOOK_METHODS = ("pre_forward", "post_forward", "new_forward")
CAPTURE_METHOD_NAMES = (
    STREAM_ORDERING_METHODS
    | {"record_event", "capture_begin"}
    | SEGMENTED_GRAPH_CONTEXTS
    | EAGER_BREAK_DECORATORS
    | set(MODEL_HOOK_METHODS)
)
# - attributes whose assignment installs capture-reachable code by itself: none (see above)
CAPTURE_ASSIGNED_ATTRS: frozenset[str] = frozenset()
CAPTURE_TOKENS = tuple(sorted(CAPTURE_API_NAMES | CAPTURE_METHOD_NAMES | CAPTURE_ASSIGNED_ATTRS))

# OFL301: "am I being traced?" - constant True in code torch.compile traces
COMPILING_TESTS = frozenset({"torch.compiler.is_compiling", "torch._dynamo.is_compiling"})
# pure allocations: they write nothing, so they produce no data another stream could race on
ALLOCATORS = frozenset({"torch.empty", "torch.empty_like", "torch.empty_strided"})
