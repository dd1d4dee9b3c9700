"""The capture sanitizer: watch every stream and event call, say which capture it happened in,
and stop at the first pair CUDA would reject (or that computes garbage), with both stacks.

`with capture_sanitizer(): ...` (or `offlint probe --sanitize -- python script.py`) patches, for
as long as it is active:

- `torch.cuda.Event.record/wait/query/synchronize/elapsed_time` (and notes `Event(external=True)`),
- `torch.cuda.Stream.wait_event/wait_stream/record_event/synchronize/query`,
- `torch.cuda.StreamContext.__enter__` (`with torch.cuda.stream(s)`), `Tensor.record_stream`,
- `torch.cuda.CUDAGraph.capture_begin/capture_end/replay` (`torch.cuda.graph` goes through them),
- the host syncs and copies a capture cannot hold: `torch.cuda.synchronize`, `Tensor.item/
  tolist/cpu/__bool__` on CUDA tensors, `Tensor.to/cuda/copy_` from pageable host memory;
- `torch.Event`/`torch.Stream` where PyTorch lets their methods be replaced (2.11: it does not;
  `limitations` says so).

What it tracks is the capture model of shared/GROUND-TRUTH.md §1: a capture begins on one stream
(its *origin*); another stream joins it when it waits on a stream or an event of the capture (a
fork) and must be joined back (the origin, or a stream of the capture, waits on it) before the
capture ends. Each event remembers where it was last recorded: eagerly, or in which capture. The
pairs it stops at, with the offlint rule that finds the same statically:

| pair | rule | CUDA's answer |
|---|---|---|
| a wait in a capture on an event recorded outside it | OFL101 | 905 |
| `wait_stream` in a capture on a stream outside it | OFL102 | 905 |
| a stream forked into a capture and not joined at its end | OFL103 | 904 |
| `with torch.cuda.stream(s)` in a capture, `s` never forked into it | OFL104 | 900 or silently missing work |
| a host sync in a capture | OFL105 | 900 |
| a copy from pageable host memory in a capture | OFL106 | PyTorch's "unless the CPU tensor is pinned" |
| `Event.query/synchronize` on an event recorded in the capture | OFL107 | 907 |
| `Event.elapsed_time` on an event last recorded in a capture | OFL107 | invalid argument |
| an eager read of a tensor a capture made, before any replay of its graph | OFL201 | none: garbage |
| a wait on an event last recorded in a capture that has ended | OFL202 | invalid argument |

A stack is a list of (code, instruction offset) pairs taken cheaply at each call; line numbers
and source lines are worked out only when a violation is written. Events and streams outside any
capture cost a few dictionary operations per call: see benchmarks/sanitizer_overhead.py.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from offlint.probing.errors import is_user_file

# rule → (name, what CUDA or PyTorch does without the sanitizer)
RULES: dict[str, tuple[str, str]] = {
    "OFL101": ("wait-on-uncaptured-event", "905 cudaErrorStreamCaptureIsolation"),
    "OFL102": ("wait-on-unforked-stream", "905 cudaErrorStreamCaptureIsolation"),
    "OFL103": ("unjoined-side-stream", "904 cudaErrorStreamCaptureUnjoined"),
    "OFL104": (
        "unforked-side-stream-work",
        "900 cudaErrorStreamCaptureUnsupported, or work silently missing from every replay",
    ),
    "OFL105": ("host-sync-in-capture", "900 cudaErrorStreamCaptureUnsupported"),
    "OFL106": (
        "pageable-host-copy",
        "PyTorch's RuntimeError 'Cannot copy between CPU and CUDA tensors during CUDA graph "
        "capture unless the CPU tensor is pinned'",
    ),
    "OFL107": ("captured-event-query", "907 cudaErrorCapturedEvent"),
    "OFL201": (
        "capture-state-escapes",
        "no error: the eager forward reads memory only a replay writes (wrong numbers)",
    ),
    "OFL202": ("stale-captured-event", "1 cudaErrorInvalidValue (invalid argument) at the wait"),
}

_MAX_FRAMES = 16
_THIS_FILE = __file__


# (code object, offset of the instruction running): reading a frame's line number decodes the
# line table, so lines are worked out only when a violation is written.
Frames = tuple[tuple[Any, int], ...]


def _stack() -> Frames:
    """The caller's stack, innermost first, without this module's frames."""
    frame: Any = sys._getframe(1)
    frames: list[tuple[Any, int]] = []
    while frame is not None and len(frames) < _MAX_FRAMES:
        code = frame.f_code
        if code.co_filename != _THIS_FILE:
            frames.append((code, frame.f_lasti))
        frame = frame.f_back
    return tuple(frames)


def _line_of(code: Any, offset: int) -> int:
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return int(line)
    return int(code.co_firstlineno)


@dataclass(frozen=True)
class Site:
    file: str
    line: int
    function: str
    code: str

    def text(self) -> str:
        return f"{self.file}:{self.line} in {self.function}: {self.code}"


def user_sites(frames: Frames, limit: int = 6) -> list[Site]:
    """The user's frames of a stack, innermost first (all frames if none is the user's)."""
    chosen = [f for f in frames if is_user_file(f[0].co_filename)] or list(frames)
    sites = []
    for code, offset in chosen[:limit]:
        line = _line_of(code, offset)
        file = code.co_filename
        sites.append(Site(file, line, code.co_name, linecache.getline(file, line).strip()))
    return sites


@dataclass
class Violation:
    rule: str
    what: str  # the call, in words
    here: Frames
    other_label: str | None = None  # what the other stack is
    other: Frames | None = None
    capture: int | None = None
    detail: str = ""

    @property
    def name(self) -> str:
        return RULES[self.rule][0]

    @property
    def prevents(self) -> str:
        return RULES[self.rule][1]

    @property
    def site(self) -> Site | None:
        sites = user_sites(self.here, 1)
        return sites[0] if sites else None

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": self.name,
            "prevents": self.prevents,
            "what": self.what,
            "detail": self.detail,
            "capture": self.capture,
            "here": [vars(site) for site in user_sites(self.here)],
            "other_label": self.other_label,
            "other": [vars(site) for site in user_sites(self.other)] if self.other else None,
        }

    def report(self) -> str:
        lines = [f"offlint sanitizer: {self.rule} {self.name}: {self.what}"]
        lines.append(f"  prevents: {self.prevents}")
        if self.detail:
            lines.append(f"  {self.detail}")
        lines.append("  here (innermost first):")
        lines.extend(f"    {site.text()}" for site in user_sites(self.here))
        if self.other is not None and self.other_label:
            lines.append(f"  {self.other_label} (innermost first):")
            lines.extend(f"    {site.text()}" for site in user_sites(self.other))
        lines.append(f"  `offlint rule {self.rule}` explains the rule and its fixes.")
        return "\n".join(lines)


class CaptureHazard(RuntimeError):
    """Raised at the first violation (mode "raise"): the call it stops has not been made."""

    def __init__(self, violation: Violation):
        super().__init__(violation.report())
        self.violation = violation


@dataclass
class _EventRecord:
    capture: int | None  # the capture it was last recorded in; None: eagerly
    stream: Any
    seq: int
    stack: Frames


@dataclass
class _Capture:
    number: int
    origin: Any
    thread: int
    stack: Frames
    # member stream → seq of its last known activity, and the seq its joins cover up to
    members: dict[Any, int] = field(default_factory=dict)
    covered: dict[Any, int] = field(default_factory=dict)
    forked_at: dict[Any, Frames] = field(default_factory=dict)
    blocks_before: set[tuple[int, int]] = field(default_factory=set)
    stopped: bool = False


def _stream_key(stream: Any) -> Any:
    handle = getattr(stream, "cuda_stream", None)
    if handle is not None:
        return ("cuda", handle)
    return (
        "stream",
        getattr(stream, "device_type", None),
        getattr(stream, "device_index", None),
        getattr(stream, "stream_id", id(stream)),
    )


class CaptureSanitizer:
    """Install with `install()` / `uninstall()` or as a context manager.

    mode "raise" stops at the first violation (CaptureHazard, before the offending call; for an
    unjoined fork, after CUDA's own 904 at the capture's end, chained); mode "record" lets every
    call through and keeps `violations` (one per rule and line), which is what the probe's
    life cycle uses to name the line of a failure CUDA reports only at the capture's end.
    """

    def __init__(self, mode: str = "raise", escapes: bool = True) -> None:
        if mode not in ("raise", "record"):
            raise ValueError(f"mode must be 'raise' or 'record', not {mode!r}")
        self.mode = mode
        self.escapes = escapes  # OFL201: watch eager reads of capture-made memory
        self.violations: list[Violation] = []
        self.limitations: list[str] = []
        self.enabled = True
        self.counts: dict[str, int] = {}
        self._seen: set[tuple[str, tuple[str, int] | None]] = set()
        self._patches: list[tuple[Any, str, Any, bool]] = []
        self._local = threading.local()
        self._seq = 0
        self._capture: _Capture | None = None
        self._captures = 0
        self._ended: set[int] = set()
        # Where each event was last recorded is kept on the event itself (an attribute named
        # after this sanitizer): no table keyed by events, so nothing here outlives them or
        # needs their hash or a weak reference.
        self._key = f"_offlint_sanitizer_{id(self)}"
        # graph → (capture number, capture stack, blocks it made) until its first replay
        self._unreplayed: dict[int, tuple[int, Frames, list[tuple[int, int]]]] = {}
        self._escape_mode: Any = None
        self._torch: Any = None

    # --- installation ------------------------------------------------------------------------

    def __enter__(self) -> CaptureSanitizer:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No checks inside (timing runs here); graph replays are still noted."""
        was = self.enabled
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = was

    def install(self) -> None:
        import torch

        self._torch = torch
        cuda = torch.cuda
        self._wrap(cuda.Event, "__new__", self._event_new, static=True)
        event_hooks: tuple[tuple[str, Callable[..., Any]], ...] = (
            ("record", self._event_record),
            ("wait", self._event_wait),
            ("query", self._event_sync),
            ("synchronize", self._event_sync),
            ("elapsed_time", self._event_elapsed),
        )
        for name, hook in event_hooks:
            self._wrap(cuda.Event, name, hook)
        stream_hooks: tuple[tuple[str, Callable[..., Any]], ...] = (
            ("wait_event", self._stream_wait_event),
            ("wait_stream", self._stream_wait_stream),
            ("record_event", self._stream_record_event),
            ("synchronize", self._stream_sync),
            ("query", self._stream_sync),
        )
        for name, hook in stream_hooks:
            self._wrap(cuda.Stream, name, hook)
        self._wrap(cuda.StreamContext, "__enter__", self._stream_enter)
        self._wrap(cuda, "synchronize", self._device_sync)
        self._wrap(cuda.CUDAGraph, "capture_begin", self._capture_begin)
        self._wrap(cuda.CUDAGraph, "capture_end", self._capture_end)
        self._wrap(cuda.CUDAGraph, "replay", self._replay)
        tensor = torch.Tensor
        self._wrap(tensor, "record_stream", self._record_stream)
        for name in ("item", "tolist", "__bool__"):
            self._wrap(tensor, name, self._tensor_sync(name))
        self._wrap(tensor, "cpu", self._tensor_cpu)
        self._wrap(tensor, "to", self._tensor_to)
        self._wrap(tensor, "cuda", self._tensor_cuda)
        self._wrap(tensor, "copy_", self._tensor_copy)
        for generic, names in (
            (getattr(torch, "Event", None), ("record", "wait", "query", "synchronize")),
            (
                getattr(torch, "Stream", None),
                ("wait_event", "wait_stream", "record_event", "synchronize", "query"),
            ),
        ):
            if generic is None:
                continue
            try:
                setattr(generic, names[0], getattr(generic, names[0]))
            except (TypeError, AttributeError):
                self.limitations.append(
                    f"torch.{generic.__name__} is a built-in type whose methods cannot be "
                    f"replaced: its {', '.join(names)} calls are not seen (torch.cuda.* are)"
                )
                continue
            hooks = {
                "record": self._event_record,
                "wait": self._event_wait,
                "query": self._event_sync,
                "synchronize": self._event_sync
                if generic is getattr(torch, "Event", None)
                else self._stream_sync,
                "wait_event": self._stream_wait_event,
                "wait_stream": self._stream_wait_stream,
                "record_event": self._stream_record_event,
            }
            for name in names:
                self._wrap(generic, name, hooks[name])

    def uninstall(self) -> None:
        self._close_escape_window()
        for owner, name, original, owned in reversed(self._patches):
            if owned:
                setattr(owner, name, original)
            else:
                with contextlib.suppress(AttributeError, TypeError):
                    delattr(owner, name)
        self._patches.clear()

    def _wrap(
        self,
        owner: Any,
        name: str,
        hook: Callable[..., Any],
        static: bool = False,
    ) -> None:
        """Replace `owner.name` by `hook(original, *args, **kwargs)`; re-entrant calls (torch's
        own wait_stream calls wait_event) go straight to the original."""
        owned = name in vars(owner)
        if static and not owned:
            return  # an inherited __new__ (a stand-in class): nothing of ours to note
        raw = vars(owner)[name] if owned else getattr(owner, name, None)
        if raw is None:
            self.limitations.append(f"{getattr(owner, '__name__', owner)} has no {name}")
            return
        original = raw.__func__ if isinstance(raw, staticmethod) else raw
        local = self._local

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if getattr(local, "busy", False):
                return original(*args, **kwargs)
            local.busy = True
            try:
                return hook(original, *args, **kwargs)
            finally:
                local.busy = False

        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        try:
            setattr(owner, name, staticmethod(wrapper) if static else wrapper)
        except (TypeError, AttributeError) as exc:
            self.limitations.append(
                f"cannot watch {getattr(owner, '__name__', owner)}.{name}: {exc}"
            )
            return
        self._patches.append((owner, name, raw, owned))

    # --- bookkeeping -------------------------------------------------------------------------

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def _current_stream(self) -> Any:
        return self._torch.cuda.current_stream()

    def _in_capture(self) -> _Capture | None:
        """The active capture, if the calling thread is the one capturing."""
        capture = self._capture
        if capture is None or capture.thread != threading.get_ident():
            return None
        return capture

    def _violate(self, violation: Violation) -> None:
        site = violation.site
        key = (violation.rule, (site.file, site.line) if site else None)
        if key in self._seen:
            return
        self._seen.add(key)
        self.violations.append(violation)
        if self.mode == "raise":
            if self._capture is not None:
                self._capture.stopped = True
            raise CaptureHazard(violation)

    def _member(self, capture: _Capture, key: Any) -> bool:
        return key in capture.members

    def _fork(self, capture: _Capture, key: Any, stack: Frames) -> None:
        seq = self._next()
        if key not in capture.members:
            capture.forked_at[key] = stack
            capture.covered[key] = 0
        capture.members[key] = seq

    # --- events ------------------------------------------------------------------------------

    def _event_new(self, original: Any, cls: Any, *args: Any, **kwargs: Any) -> Any:
        event = original(cls, *args, **kwargs)
        if kwargs.get("external") or (len(args) >= 4 and args[3]):
            with contextlib.suppress(AttributeError, TypeError):
                event._offlint_external = True
        return event

    def _record_of(self, event: Any) -> _EventRecord | None:
        return getattr(event, self._key, None)

    def _note_record(self, event: Any, stream: Any) -> None:
        """`stream` None: the current stream. Outside a capture the stream is not looked up
        (an eager record only needs to say it was eager: the cheap path of an eager forward)."""
        capture = self._in_capture()
        key = None
        in_capture = None
        if capture is not None:
            key = _stream_key(stream if stream is not None else self._current_stream())
            in_capture = capture.number if key in capture.members else None
        with contextlib.suppress(AttributeError, TypeError):
            setattr(event, self._key, _EventRecord(in_capture, key, self._next(), _stack()))

    def _event_record(self, original: Any, event: Any, stream: Any = None) -> Any:
        self._count("Event.record")
        result = original(event, stream) if stream is not None else original(event)
        if self.enabled:
            self._note_record(event, stream)
        return result

    def _check_wait(self, waiter: Any, event: Any, what: str) -> None:
        """`waiter` None: the current stream (looked up only inside a capture)."""
        if getattr(event, "_offlint_external", False):
            return
        record = self._record_of(event)
        if record is None:
            return  # never recorded (a no-op wait), or recorded before the sanitizer
        capture = self._in_capture()
        if (
            record.capture is not None
            and record.capture in self._ended
            and (capture is None or record.capture != capture.number)
        ):
            self._violate(
                Violation(
                    "OFL202",
                    f"{what} on an event last recorded in capture #{record.capture}, which has "
                    "ended" + (" (this wait is eager)" if capture is None else ""),
                    _stack(),
                    "the event was last recorded here, inside that capture",
                    record.stack,
                    capture.number if capture else None,
                    "fall back to waiting on the stream (`wait_stream`) when the event was last "
                    "recorded during a capture, or make it with `Event(external=True)`",
                )
            )
            return
        if capture is None:
            return
        if record.capture is None:
            self._violate(
                Violation(
                    "OFL101",
                    f"{what} inside capture #{capture.number} on an event recorded outside it",
                    _stack(),
                    "the event was last recorded here, before the capture began (eagerly)",
                    record.stack,
                    capture.number,
                    "inside a capture, skip the wait when the data is already in place (a copy "
                    "made before the capture) or issue the copy again inside the capture",
                )
            )
            return
        # Recorded in this capture: the waiter joins it (a fork) or joins the event's stream.
        key = _stream_key(waiter if waiter is not None else self._current_stream())
        if key in capture.members:
            capture.covered[record.stream] = max(capture.covered.get(record.stream, 0), record.seq)
            capture.members[key] = self._next()
        else:
            self._fork(capture, key, _stack())

    def _event_wait(self, original: Any, event: Any, stream: Any = None) -> Any:
        self._count("Event.wait")
        if self.enabled:
            self._check_wait(stream, event, "Event.wait()")
        return original(event, stream) if stream is not None else original(event)

    def _event_sync(self, original: Any, event: Any) -> Any:
        self._count("Event.query/synchronize")
        capture = self._in_capture() if self.enabled else None
        if capture is not None:
            record = self._record_of(event)
            if record is not None and record.capture == capture.number:
                self._violate(
                    Violation(
                        "OFL107",
                        f"Event.query()/synchronize() inside capture #{capture.number} on an "
                        "event recorded in it",
                        _stack(),
                        "the event was recorded here, in the same capture",
                        record.stack,
                        capture.number,
                    )
                )
            else:
                self._host_sync(capture, "Event.query()/synchronize() (a host sync)")
        return original(event)

    def _event_elapsed(self, original: Any, event: Any, end: Any) -> Any:
        self._count("Event.elapsed_time")
        if self.enabled:
            for timed in (event, end):
                record = self._record_of(timed)
                if record is None or record.capture is None:
                    continue
                self._violate(
                    Violation(
                        "OFL107",
                        f"Event.elapsed_time() on an event last recorded inside capture "
                        f"#{record.capture}",
                        _stack(),
                        "the event was last recorded here, inside that capture",
                        record.stack,
                        None,
                        "a replay does not make a timing event timeable (CUDA answers invalid "
                        "argument): time graph replays with events recorded eagerly around "
                        "`replay()`, or make them with `Event(external=True)`",
                    )
                )
                break
        return original(event, end)

    # --- streams -----------------------------------------------------------------------------

    def _stream_wait_event(self, original: Any, stream: Any, event: Any) -> Any:
        self._count("Stream.wait_event")
        if self.enabled:
            self._check_wait(stream, event, "Stream.wait_event()")
        return original(stream, event)

    def _stream_wait_stream(self, original: Any, stream: Any, other: Any) -> Any:
        self._count("Stream.wait_stream")
        capture = self._in_capture() if self.enabled else None
        if capture is not None:
            waiter, waited = _stream_key(stream), _stream_key(other)
            if waited in capture.members:
                if waiter in capture.members:
                    capture.covered[waited] = self._next()
                    capture.members[waiter] = self._next()
                else:
                    self._fork(capture, waiter, _stack())
            elif waiter in capture.members and waited != waiter:
                self._violate(
                    Violation(
                        "OFL102",
                        f"Stream.wait_stream() inside capture #{capture.number} on a stream "
                        "that was never forked into it",
                        _stack(),
                        "the capture began here",
                        capture.stack,
                        capture.number,
                        "fork the side stream from the capturing stream first "
                        "(`side.wait_stream(current)`), or do not wait on it while capturing",
                    )
                )
        return original(stream, other)

    def _stream_record_event(self, original: Any, stream: Any, event: Any = None) -> Any:
        self._count("Stream.record_event")
        result = original(stream, event) if event is not None else original(stream)
        if self.enabled:
            self._note_record(result if result is not None else event, stream)
        return result

    def _stream_sync(self, original: Any, stream: Any) -> Any:
        self._count("Stream.synchronize/query")
        capture = self._in_capture() if self.enabled else None
        if capture is not None:
            self._host_sync(capture, "Stream.synchronize()/query() (a host sync)")
        return original(stream)

    def _stream_enter(self, original: Any, context: Any) -> Any:
        capture = self._in_capture() if self.enabled else None
        stream = getattr(context, "stream", None)
        if capture is not None and stream is not None:
            key = _stream_key(stream)
            if key in capture.members:
                capture.members[key] = self._next()
            else:
                self._violate(
                    Violation(
                        "OFL104",
                        f"`with torch.cuda.stream(s)` inside capture #{capture.number} on a "
                        "stream never forked into it",
                        _stack(),
                        "the capture began here",
                        capture.stack,
                        capture.number,
                        "fork it first: `s.wait_stream(torch.cuda.current_stream())`, and join "
                        "it back before the capture ends",
                    )
                )
        return original(context)

    def _device_sync(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        capture = self._in_capture() if self.enabled else None
        if capture is not None:
            self._host_sync(capture, "torch.cuda.synchronize()")
        return original(*args, **kwargs)

    def _record_stream(self, original: Any, tensor: Any, stream: Any) -> Any:
        self._count("Tensor.record_stream")
        return original(tensor, stream)

    def _host_sync(self, capture: _Capture, what: str) -> None:
        self._violate(
            Violation(
                "OFL105",
                f"{what} inside capture #{capture.number}",
                _stack(),
                "the capture began here",
                capture.stack,
                capture.number,
                "a capture cannot wait for the device: move the sync out of the captured "
                "code, or skip it while capturing",
            )
        )

    # --- tensors (checked only while capturing: the eager fast path is one attribute read) ----

    def _tensor_sync(self, name: str) -> Callable[..., Any]:
        def hook(original: Any, tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if self._capture is not None and self.enabled:
                capture = self._in_capture()
                if capture is not None and tensor.is_cuda:
                    self._host_sync(capture, f"Tensor.{name}() on a CUDA tensor")
            return original(tensor, *args, **kwargs)

        return hook

    def _tensor_cpu(self, original: Any, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        if self._capture is not None and self.enabled:
            capture = self._in_capture()
            if capture is not None and tensor.is_cuda:
                self._host_sync(capture, "Tensor.cpu() on a CUDA tensor")
        return original(tensor, *args, **kwargs)

    def _pageable(self, capture: _Capture, what: str) -> None:
        self._violate(
            Violation(
                "OFL106",
                f"{what} inside capture #{capture.number}",
                _stack(),
                "the capture began here",
                capture.stack,
                capture.number,
                "pin the host tensor once, outside the capture (`pin_memory()`), and copy "
                "from the pinned one",
            )
        )

    def _host_unpinned(self, tensor: Any) -> bool:
        return bool(tensor.device.type == "cpu" and not tensor.is_pinned())

    def _tensor_to(self, original: Any, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        if self._capture is not None and self.enabled:
            capture = self._in_capture()
            if capture is not None and self._host_unpinned(tensor):
                with contextlib.suppress(Exception):
                    device = self._torch._C._nn._parse_to(*args, **kwargs)[0]
                    if device is not None and device.type == "cuda":
                        self._pageable(capture, "Tensor.to(cuda) from pageable host memory")
        return original(tensor, *args, **kwargs)

    def _tensor_cuda(self, original: Any, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        if self._capture is not None and self.enabled:
            capture = self._in_capture()
            if capture is not None and self._host_unpinned(tensor):
                self._pageable(capture, "Tensor.cuda() from pageable host memory")
        return original(tensor, *args, **kwargs)

    def _tensor_copy(self, original: Any, tensor: Any, source: Any, *args: Any, **kw: Any) -> Any:
        if self._capture is not None and self.enabled:
            capture = self._in_capture()
            if capture is not None and hasattr(source, "device"):
                if tensor.is_cuda and self._host_unpinned(source):
                    self._pageable(capture, "copy_() into a CUDA tensor from pageable host memory")
                elif source.is_cuda and self._host_unpinned(tensor):
                    self._pageable(capture, "copy_() from a CUDA tensor into pageable host memory")
        return original(tensor, source, *args, **kw)

    # --- captures ----------------------------------------------------------------------------

    def _active_blocks(self) -> set[tuple[int, int]]:
        if not self.escapes:
            return set()
        try:
            snapshot = self._torch.cuda.memory_snapshot()
        except Exception:
            return set()
        blocks = set()
        for segment in snapshot:
            address = segment.get("address", 0)
            for block in segment.get("blocks", []):
                start = block.get("address", address)
                if block.get("state") == "active_allocated":
                    blocks.add((start, block.get("size", 0)))
                address = start + block.get("size", 0)
        return blocks

    def _capture_begin(self, original: Any, graph: Any, *args: Any, **kwargs: Any) -> Any:
        self._count("CUDAGraph.capture_begin")
        before = self._active_blocks()
        result = original(graph, *args, **kwargs)
        self._captures += 1
        capture = _Capture(self._captures, None, threading.get_ident(), _stack())
        capture.origin = _stream_key(self._current_stream())
        capture.members[capture.origin] = self._next()
        capture.blocks_before = before
        self._capture = capture
        return result

    def _capture_end(self, original: Any, graph: Any) -> Any:
        self._count("CUDAGraph.capture_end")
        capture = self._capture
        unjoined: Violation | None = None
        if capture is not None and self.enabled and not capture.stopped:
            for key, last in capture.members.items():
                if key == capture.origin or capture.covered.get(key, 0) >= last:
                    continue
                unjoined = Violation(
                    "OFL103",
                    f"capture #{capture.number} ends with a side stream forked into it and "
                    "not joined back",
                    _stack(),
                    "the side stream was forked into the capture here",
                    capture.forked_at.get(key),
                    capture.number,
                    "join it before the capture ends: the capturing stream waits on the side "
                    "stream (`current.wait_stream(side)`) or on an event recorded on it after "
                    "its last work, e.g. in an end-of-forward join",
                )
                break
        try:
            if unjoined is not None and self.mode == "raise":
                try:
                    original(graph)
                except Exception as cuda_error:
                    self._end(capture, graph)
                    self._violate_from(unjoined, cuda_error)
                self._end(capture, graph)
                self._violate(unjoined)
                return None
            result = original(graph)
        except BaseException:
            self._end(capture, graph, made=False)
            raise
        self._end(capture, graph)
        if unjoined is not None:
            self._violate(unjoined)
        return result

    def _violate_from(self, violation: Violation, cause: BaseException) -> None:
        try:
            self._violate(violation)
        except CaptureHazard as hazard:
            raise hazard from cause

    def _end(self, capture: _Capture | None, graph: Any, made: bool = True) -> None:
        if capture is None:
            return
        self._capture = None
        self._ended.add(capture.number)
        if not (made and self.escapes):
            return
        new = sorted(self._active_blocks() - capture.blocks_before)
        if new:
            self._unreplayed[id(graph)] = (capture.number, capture.stack, new)
            self._open_escape_window()

    def _replay(self, original: Any, graph: Any, *args: Any, **kwargs: Any) -> Any:
        if self._unreplayed.pop(id(graph), None) is not None and not self._unreplayed:
            self._close_escape_window()
        return original(graph, *args, **kwargs)

    # --- OFL201: eager reads of capture-made memory before the first replay --------------------

    def _open_escape_window(self) -> None:
        if self._escape_mode is not None:
            return
        try:
            mode = _escape_mode_class(self._torch)(self)
            mode.__enter__()
        except Exception as exc:  # pragma: no cover - depends on torch internals
            self.limitations.append(f"eager reads of capture-made tensors not watched: {exc}")
            return
        self._escape_mode = mode

    def _close_escape_window(self) -> None:
        mode, self._escape_mode = self._escape_mode, None
        if mode is not None:
            with contextlib.suppress(Exception):
                mode.__exit__(None, None, None)

    def check_escape(self, func: Any, args: Any, kwargs: Any) -> None:
        """Called by the dispatch mode for every eager op while a graph awaits its first
        replay: a read of a block that capture made (and nothing eager wrote since) stops."""
        if not self.enabled or self._capture is not None or not self._unreplayed:
            return
        torch = self._torch
        schema = getattr(func, "_schema", None)
        written: set[int] = set()
        if schema is not None:
            for index, argument in enumerate(schema.arguments):
                alias = argument.alias_info
                if alias is not None and alias.is_write:
                    value = args[index] if index < len(args) else kwargs.get(argument.name)
                    if isinstance(value, torch.Tensor):
                        written.add(id(value))
        flat = list(args) + list(kwargs.values())
        for value in flat:
            tensors = value if isinstance(value, (list, tuple)) else (value,)
            for tensor in tensors:
                if not isinstance(tensor, torch.Tensor) or not tensor.is_cuda:
                    continue
                pointer = tensor.data_ptr()
                for graph, (number, stack, blocks) in list(self._unreplayed.items()):
                    hit = next((b for b in blocks if b[0] <= pointer < b[0] + b[1]), None)
                    if hit is None:
                        continue
                    if id(tensor) in written:
                        blocks.remove(hit)  # an eager write defines it: later reads are fine
                        if not blocks:
                            del self._unreplayed[graph]
                        continue
                    self._violate(
                        Violation(
                            "OFL201",
                            f"eager {getattr(func, '__name__', func)} reads a tensor made inside "
                            f"capture #{number}, before any replay of its graph wrote it",
                            _stack(),
                            "the capture that made it began here",
                            stack,
                            None,
                            "re-make (or re-fill) capture-made tensors eagerly before an eager "
                            "forward uses them, or keep them out of the eager path",
                        )
                    )


_MODE_CLASS: Any = None


def _escape_mode_class(torch: Any) -> Any:
    global _MODE_CLASS
    if _MODE_CLASS is None:
        from torch.utils._python_dispatch import TorchDispatchMode

        class _EscapeWatch(TorchDispatchMode):
            def __init__(self, sanitizer: CaptureSanitizer) -> None:
                super().__init__()
                self.sanitizer = sanitizer

            def __torch_dispatch__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                kwargs = kwargs or {}
                self.sanitizer.check_escape(func, args, kwargs)
                return func(*args, **kwargs)

        _MODE_CLASS = _EscapeWatch
    return _MODE_CLASS


@contextlib.contextmanager
def capture_sanitizer(mode: str = "raise", escapes: bool = True) -> Iterator[CaptureSanitizer]:
    """`with capture_sanitizer(): run_the_graph_runner()` — the context manager for tests."""
    sanitizer = CaptureSanitizer(mode, escapes)
    sanitizer.install()
    try:
        yield sanitizer
    finally:
        sanitizer.uninstall()
