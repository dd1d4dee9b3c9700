"""A stand-in `torch` module that enforces the capture rules of shared/GROUND-TRUTH.md section 1
on the CPU, for running what `offlint fix` writes: streams, events, forks, joins and one capture
at a time, no tensors.

- a wait inside a capture on an event recorded outside it raises (905, isolation);
- an eager wait on an event last recorded inside an ended capture raises (invalid argument);
- `cur.wait_stream(side)` inside a capture when `side` was never forked into it raises (905);
- work on a side stream inside a capture that was not forked into it raises (900);
- a capture that ends with a forked side stream's work not joined raises (904, unjoined);
- `Event(external=True)` waits and records are legal across capture boundaries.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator


class CaptureError(RuntimeError):
    pass


class _State:
    def __init__(self) -> None:
        self.capture: int | None = None  # id of the capture under way
        self.captures = 0
        self.main = Stream()
        self.current = self.main
        self.forked: set[int] = set()  # side streams forked into this capture
        self.pending: dict[int, int] = {}  # side stream -> records not yet joined in this capture


STATE: _State


class Stream:
    def wait_stream(self, other: Stream) -> None:
        state = STATE
        if state.capture is None:
            return
        if self is state.main or id(self) in state.forked:
            if other is state.main or id(other) in state.forked:
                if other is state.main:
                    state.forked.add(id(self))  # a fork
                else:
                    state.pending.pop(id(other), None)  # a join
                return
            raise CaptureError("905: wait_stream on a stream not forked into the capture")
        if other is state.main:
            state.forked.add(id(self))
            return
        raise CaptureError("905: wait_stream between streams outside the capture")

    def wait_event(self, event: Event) -> None:
        event.wait(self)


class Event:
    def __init__(self, enable_timing: bool = False, external: bool = False) -> None:
        self.external = external
        self.recorded_in: int | str | None = "never"
        self.stream: Stream | None = None

    def record(self, stream: Stream | None = None) -> None:
        state = STATE
        stream = stream or state.current
        if state.capture is not None and stream is not state.main and id(stream) not in state.forked:
            raise CaptureError("900: work on a side stream not forked into the capture")
        self.recorded_in = state.capture
        self.stream = stream
        if state.capture is not None and stream is not state.main:
            state.pending[id(stream)] = state.pending.get(id(stream), 0) + 1

    def wait(self, stream: Stream | None = None) -> None:
        state = STATE
        if self.recorded_in == "never":
            return
        if not self.external:
            if state.capture is not None and self.recorded_in != state.capture:
                raise CaptureError("905: wait inside a capture on an event recorded outside it")
            if state.capture is None and self.recorded_in is not None:
                raise CaptureError("invalid argument: eager wait on an event recorded in an ended capture")
        if state.capture is not None and self.stream is not None and self.stream is not state.main:
            state.pending.pop(id(self.stream), None)


def current_stream() -> Stream:
    return STATE.current


def is_current_stream_capturing() -> bool:
    return STATE.capture is not None


@contextlib.contextmanager
def stream(side: Stream) -> Iterator[None]:
    state = STATE
    before = state.current
    state.current = side
    try:
        yield
    finally:
        state.current = before


@contextlib.contextmanager
def capture() -> Iterator[None]:
    """`with torch.cuda.graph(g):` as far as these rules go."""
    state = STATE
    state.captures += 1
    state.capture = state.captures
    state.forked, state.pending = set(), {}
    try:
        yield
        if state.pending:
            raise CaptureError("904: the capture ends with a fork unjoined")
    finally:
        state.capture = None


def fresh_torch() -> types.ModuleType:
    """A new `torch` stand-in (its own capture state)."""
    global STATE
    STATE = _State()
    torch = types.ModuleType("torch")
    cuda = types.ModuleType("torch.cuda")
    for name, value in {
        "Stream": Stream,
        "Event": Event,
        "current_stream": current_stream,
        "is_current_stream_capturing": is_current_stream_capturing,
        "stream": stream,
    }.items():
        setattr(cuda, name, value)
    torch.cuda = cuda  # type: ignore[attr-defined]
    return torch
