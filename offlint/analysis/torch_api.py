"""The PyTorch API surface the rules reason about, by canonical qualified name.

Qualified names are what `imports.NameResolver` produces: `tc.Event` after `import torch.cuda as
tc` becomes `torch.cuda.Event`. Aliases PyTorch itself exports (`torch.cuda.streams.Event`,
`torch.Event`) are folded into one canonical name by `canonical()`.
"""

from __future__ import annotations

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
CAPTURE_TESTS = frozenset({"torch.cuda.is_current_stream_capturing"})
GRAPH_CONTEXTS = frozenset({"torch.cuda.graph"})
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

# tokens whose presence in a file's text is necessary for any capture-reachable code; the
# prefilter refuses to parse a file that mentions none of them (nor a configured name)
CAPTURE_TOKENS = (
    "Stream",
    "Event",
    "wait_stream",
    "wait_event",
    "record_stream",
    "is_current_stream_capturing",
    "graph",
    "capture_begin",
    "current_stream",
    "default_stream",
    "stream(",
)
