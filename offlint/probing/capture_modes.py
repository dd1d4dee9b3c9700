"""`--capture-mode`: the forward captured in pieces, as piecewise and segmented graph runners do.

`whole` is one `torch.cuda.graph` around the forward (scenario.py's own path). The others split
the forward at the model's middle layer (`layers[len(layers) // 2]`, the probe's own stack or an
`--entry` model's `layers`) with hooks on that layer, and capture with `CUDAGraph.capture_begin`
and `capture_end` on a capture stream of their own, into the pool every graph shares:

- `pieces`: two graphs, the first ends where the middle layer begins and the second begins
  there; nothing runs between them and the probe joins nothing (a piecewise runner's pieces;
  vLLM's wrappers additionally call the offloader's `join_after_forward()` inside each capture,
  which only an offloader with such a join can answer);
- `segmented-vllm`: segment 1, then the middle layer run eagerly as the break (attention's place
  in a real model), then segment 2; at replay the break runs again between the segment replays
  on the same tensors and its output is copied into the tensor segment 2 reads. Nothing is joined
  at a segment end (vLLM's `BreakableCUDAGraphCapture._end_segment`);
- `segmented-sglang`: the same segments and break, with SGLang's fork tracking: while the capture
  lasts (breaks included) `torch.cuda.Stream.wait_stream` is hooked; `side.wait_stream(capturing)`
  is a fork, remembered; `capturing.wait_stream(side)` a join, forgotten, and skipped when `side`
  is not capturing (a join in a break); at each segment end every remembered stream still in
  the capture is joined (SGLang's `_end_capture_segment`). Event-based forks are seen by neither.

What differs from the engines' classes: the break is a whole layer with its hooks (not one
attention op inside it); there is one break per forward (engines break at every attention
layer); break outputs are ordinary allocations kept alive by the replay closure (SGLang pauses
pool allocation; vLLM requires in-place outputs); graphs are instantiated by PyTorch's
`CUDAGraph` (SGLang's class instantiates its own segment handles through cuda-python); the
engine's own pre-capture / pre-replay offloader sync (vLLM's `sync_prev_onload()`) is not made.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from offlint.probing.errors import ProbeUsageError


class SplitGraph:
    """The graphs of one forward and the eager breaks between them, replayed in order (the same
    `replay()` a `torch.cuda.CUDAGraph` has, so replays and timing treat both alike)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.graphs: list[torch.cuda.CUDAGraph] = []
        self.steps: list[Callable[[], Any]] = []
        self.breaks = 0
        # segmented-sglang: side streams joined at segment ends, per segment.
        self.joins_at_segment_end: list[int] = []

    def replay(self) -> None:
        for step in self.steps:
            step()

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"graphs": len(self.graphs), "eager_breaks": self.breaks}
        if self.mode == "segmented-sglang":
            info["joins_at_segment_end"] = list(self.joins_at_segment_end)
        return info


def layer_list(model: Any) -> list[nn.Module]:
    """The model's layers in forward order (`model.layers`), where the forward is split."""
    layers = getattr(model, "layers", None)
    if isinstance(layers, (nn.ModuleList, nn.Sequential, list, tuple)) and all(
        isinstance(layer, nn.Module) for layer in layers
    ):
        if len(layers) >= 2:
            return list(layers)
        raise ProbeUsageError(
            f"--capture-mode splits the forward at its middle layer: the model has {len(layers)} "
            "layer(s), at least 2 are needed"
        )
    raise ProbeUsageError(
        "--capture-mode other than whole splits the forward at the model's middle layer: the "
        "model has no `layers` list of modules (give build()'s model a `layers` ModuleList)"
    )


def _is_capturing(stream: torch.cuda.Stream) -> bool:
    """Whether `stream` takes part in a capture (set as current for the query, then restored:
    not a stream context, which the sanitizer would take for work on that stream)."""
    current = torch.cuda.current_stream()
    torch.cuda.set_stream(stream)
    try:
        return bool(torch.cuda.is_current_stream_capturing())
    finally:
        torch.cuda.set_stream(current)


class _SGLangForkTracking:
    """SGLang's breakable capture's `wait_stream` hook and segment-end join (see the module)."""

    def __init__(self, capturing: torch.cuda.Stream) -> None:
        self.capturing = capturing
        self.forked: dict[int, torch.cuda.Stream] = {}
        self.original: Any = None
        self.owned = False
        self._raw: Any = None

    def install(self) -> None:
        # The class of the capture stream is torch.cuda.Stream, the class SGLang hooks.
        cls = type(self.capturing)
        self.owned = "wait_stream" in vars(cls)
        self._raw = vars(cls).get("wait_stream")
        self.original = cls.wait_stream
        tracking = self

        def wait_stream(stream: torch.cuda.Stream, other: torch.cuda.Stream) -> Any:
            return tracking.hooked(stream, other)

        cls.wait_stream = wait_stream  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        cls = type(self.capturing)
        if self.owned:
            cls.wait_stream = self._raw  # type: ignore[method-assign]
        else:
            with contextlib.suppress(AttributeError):
                delattr(cls, "wait_stream")

    def hooked(self, stream: torch.cuda.Stream, other: torch.cuda.Stream) -> Any:
        capturing = self.capturing.cuda_stream
        waiter_is_capturing = stream.cuda_stream == capturing
        waited_is_capturing = other.cuda_stream == capturing
        if waiter_is_capturing and not waited_is_capturing:
            # A join; SGLang skips one on a stream outside the capture (e.g. in a break).
            if not _is_capturing(other):
                return None
            self.forked.pop(other.cuda_stream, None)
        elif waited_is_capturing and not waiter_is_capturing:
            self.forked[stream.cuda_stream] = stream
        return self.original(stream, other)

    def join_forks(self) -> int:
        joined = 0
        for side in self.forked.values():
            if _is_capturing(side):
                self.original(self.capturing, side)
                joined += 1
        self.forked.clear()
        return joined


def _replay(graph: torch.cuda.CUDAGraph) -> None:
    graph.replay()


def _copy_outputs(into: Any, fresh: Any) -> None:
    if isinstance(into, torch.Tensor):
        into.copy_(fresh)
    elif isinstance(into, (list, tuple)):
        for target, source in zip(into, fresh, strict=True):
            _copy_outputs(target, source)
    elif isinstance(into, dict):
        for key in into:
            _copy_outputs(into[key], fresh[key])


@contextlib.contextmanager
def _hooks(handles: list[Any]) -> Iterator[None]:
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def capture_split(
    mode: str,
    forward: Callable[[], Any],
    layers: Sequence[nn.Module],
    pool: Any,
) -> tuple[SplitGraph, Any]:
    """Capture `forward()` split at `layers[len(layers) // 2]` in `mode`; (the graph, the
    forward's output). A failure raises the CUDA error that ended the capture (the segment
    being captured is ended first, so the device is not left capturing)."""
    split = SplitGraph(mode)
    segmented = mode.startswith("segmented")
    middle = layers[len(layers) // 2]
    stream = torch.cuda.Stream()
    tracking = _SGLangForkTracking(stream) if mode == "segmented-sglang" else None
    current: list[torch.cuda.CUDAGraph] = []
    # Calls of the middle layer under way (an offloader's functional_call re-enters it) and
    # whether the boundary was crossed: one boundary per forward, at the outermost call.
    depth = [0]
    passed = [False]

    def begin() -> None:
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin(pool=pool)
        current.append(graph)

    def end() -> None:
        if tracking is not None:
            split.joins_at_segment_end.append(tracking.join_forks())
        graph = current.pop()
        graph.capture_end()
        split.graphs.append(graph)
        # looked up at replay, as a whole graph's replay is (the sanitizer may wrap it)
        split.steps.append(functools.partial(_replay, graph))

    def before_middle(module: nn.Module, args: Any) -> None:
        depth[0] += 1
        if depth[0] > 1 or passed[0]:
            return
        passed[0] = True
        end()
        if not segmented:
            begin()

    def after_middle(module: nn.Module, args: Any, output: Any) -> None:
        depth[0] -= 1
        if depth[0] > 0 or not segmented or current:
            return

        # The break ran eagerly; at replay it runs again on the same input tensors and writes
        # the tensors the next segment was captured reading.
        def rerun(args: Any = args, output: Any = output) -> None:
            _copy_outputs(output, module(*args))

        split.steps.append(rerun)
        split.breaks += 1
        begin()

    # As torch.cuda.graph does before a capture.
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()
    outer = torch.cuda.current_stream()
    stream.wait_stream(outer)
    handles = [
        middle.register_forward_pre_hook(before_middle, prepend=True),
        middle.register_forward_hook(after_middle),
    ]
    if tracking is not None:
        tracking.install()
    try:
        with _hooks(handles), torch.cuda.stream(stream):
            begin()
            try:
                output = forward()
                end()
            except BaseException:
                while current:
                    with contextlib.suppress(Exception):
                        current.pop().capture_end()
                raise
    finally:
        if tracking is not None:
            tracking.uninstall()
        outer.wait_stream(stream)
    return split, output
