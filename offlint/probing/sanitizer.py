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
| with `races=True` (`--races`): a kernel touching a tensor that another stream's kernel touched, with no event or stream wait ordering them (PyTorch's CUDA sanitizer finds it) | OFL205 | none: wrong numbers |

A stack is a list of (code, instruction offset) pairs taken only where a check may need it;
line numbers and source lines are worked out only when a violation is written. On an eager
forward (no capture live) a watched call costs its wrapper, a counter, and for an event record
the lookup of the record shared by its call site (OFL101's second stack is the stack of the first
eager record made at that line from that caller); tensor methods and host syncs go straight to
torch's: see benchmarks/sanitizer_overhead.py.

Races between streams outside captures are PyTorch's CUDA sanitizer's field (CSAN: it follows
every kernel's reads and writes, at a cost of many times the forward): `races=True` turns it on
for as long as the capture sanitizer is installed and reports its first unordered pair as OFL205
with both stacks. It is off by default and costs nothing then.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from threading import get_ident
from typing import Any, NamedTuple

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
    "OFL205": (
        "unsynchronized-side-stream-result",
        "no error: two streams touch the tensor in no fixed order (wrong numbers, no CUDA error)",
    ),
}

_MAX_FRAMES = 16
_MAX_EAGER_SITES = 4096
_THIS_FILE = __file__

# How a watched method's wrapper treats torch's own nested calls: Stream.wait_stream calls
# record_event and wait_event, Stream.wait_event calls Event.wait, Stream.record_event makes an
# Event and records it. An _OUTER wrapper marks its thread busy while its hook runs; an _INNER
# one passes straight to the original while the thread is busy; _ALONE ones neither nest nor are
# nested (C methods, graph calls), so they skip the guard.
_ALONE, _INNER, _OUTER = 0, 1, 2
_MISSING: Any = object()  # an argument not passed


def _first_outside(frame: Any) -> Any:
    """The innermost frame at or above `frame` that is not this module's (our frames sit only on
    top: a hook and its wrapper)."""
    while frame is not None and frame.f_code.co_filename == _THIS_FILE:
        frame = frame.f_back
    return frame


def _frames_from(frame: Any) -> Frames:
    frames: list[tuple[Any, int]] = []
    append = frames.append
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        append((frame.f_code, frame.f_lasti))
        frame = frame.f_back
    return tuple(frames)


def _stack() -> Frames:
    """The caller's stack, innermost first, without this module's frames."""
    return _frames_from(_first_outside(sys._getframe(1)))


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


# A stack, innermost first. Its entries are (code object, offset of the instruction running):
# reading a frame's line number decodes the line table, so lines are worked out only when a
# violation is written. Stacks taken by PyTorch's CUDA sanitizer come as resolved Sites.
Frames = tuple[tuple[Any, int] | Site, ...]


def _file_of(entry: tuple[Any, int] | Site) -> str:
    return entry.file if isinstance(entry, Site) else str(entry[0].co_filename)


def user_sites(frames: Frames, limit: int = 6) -> list[Site]:
    """The user's frames of a stack, innermost first (all frames if none is the user's)."""
    chosen = [f for f in frames if is_user_file(_file_of(f))] or list(frames)
    sites = []
    for entry in chosen[:limit]:
        if isinstance(entry, Site):
            sites.append(entry)
            continue
        code, offset = entry
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


class _EventRecord(NamedTuple):
    """Where an event was last recorded. Eager records are shared per call site (see
    `CaptureSanitizer._note_record`): an eager record allocates nothing."""

    capture: int | None  # the capture it was last recorded in; None: eagerly
    stream: Any  # the stream's key (captures only)
    seq: int  # the bookkeeping clock when it was recorded (captures only)
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


class _Guard(threading.local):
    busy = False  # an _OUTER watched call of this thread is running


class CaptureSanitizer:
    """Install with `install()` / `uninstall()` or as a context manager.

    mode "raise" stops at the first violation (CaptureHazard, before the offending call; for an
    unjoined fork, after CUDA's own 904 at the capture's end, chained); mode "record" lets every
    call through and keeps `violations` (one per rule and line), which is what the probe's
    life cycle uses to name the line of a failure CUDA reports only at the capture's end.
    """

    def __init__(self, mode: str = "raise", escapes: bool = True, races: bool = False) -> None:
        if mode not in ("raise", "record"):
            raise ValueError(f"mode must be 'raise' or 'record', not {mode!r}")
        self.mode = mode
        self.escapes = escapes  # OFL201: watch eager reads of capture-made memory
        self.races = races  # OFL205: PyTorch's CUDA sanitizer on eager races between streams
        self._races_undo: tuple[Any, Any, Any, bool, Any] | None = None
        self.violations: list[Violation] = []
        self.limitations: list[str] = []
        self.enabled = True
        self._counts: dict[str, int] = {}
        self._seen: set[tuple[str, tuple[str, int] | None]] = set()
        self._patches: list[tuple[Any, str, Any, bool]] = []
        self._guard = _Guard()
        self._seq = 0
        self._capture: _Capture | None = None
        self._captures = 0
        self._ended: set[int] = set()
        # Where each event was last recorded is kept on the event itself (an attribute named
        # after this sanitizer): no table keyed by events, so nothing here outlives them or
        # needs their hash or a weak reference.
        self._key = f"_offlint_sanitizer_{id(self)}"
        # call site (ids of the innermost two codes and their offsets) → the eager record made
        # there: an eager forward records the same events at the same lines every step
        self._eager_records: dict[tuple[int, int, int, int], _EventRecord] = {}
        # graph → (capture number, capture stack, blocks it made) until its first replay
        self._unreplayed: dict[int, tuple[int, Frames, list[tuple[int, int]]]] = {}
        self._escape_mode: Any = None
        self._torch: Any = None

    @property
    def counts(self) -> dict[str, int]:
        """How many of each watched stream/event/graph call the program made (not counting the
        calls torch's own methods make inside them)."""
        return {name: count for name, count in self._counts.items() if count}

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

    def install(self, torch: Any = None) -> None:
        """Patch torch (`torch`: a stand-in module with the same names, for tests)."""
        if torch is None:
            import torch
        self._torch = torch
        cuda = torch.cuda
        self._wrap(cuda.Event, "__new__", self._event_new, static=True)
        self._wrap(
            cuda.Event, "record", self._event_record, "Event.record", _INNER, one_argument=True
        )
        self._wrap(cuda.Event, "wait", self._event_wait, "Event.wait", _INNER, one_argument=True)
        for name in ("query", "synchronize"):
            self._wrap(
                cuda.Event, name, self._event_sync, "Event.query/synchronize", capture_only=True
            )
        self._wrap(cuda.Event, "elapsed_time", self._event_elapsed, "Event.elapsed_time")
        stream_hooks: tuple[tuple[str, Callable[..., Any]], ...] = (
            ("wait_event", self._stream_wait_event),
            ("wait_stream", self._stream_wait_stream),
            ("record_event", self._stream_record_event),
        )
        for name, hook in stream_hooks:
            self._wrap(cuda.Stream, name, hook, f"Stream.{name}", _OUTER, one_argument=True)
        for name in ("synchronize", "query"):
            self._wrap(
                cuda.Stream, name, self._stream_sync, "Stream.synchronize/query", capture_only=True
            )
        self._wrap(cuda.StreamContext, "__enter__", self._stream_enter, capture_only=True)
        self._wrap(cuda, "synchronize", self._device_sync, capture_only=True)
        self._wrap(cuda.CUDAGraph, "capture_begin", self._capture_begin, "CUDAGraph.capture_begin")
        self._wrap(cuda.CUDAGraph, "capture_end", self._capture_end, "CUDAGraph.capture_end")
        self._wrap(cuda.CUDAGraph, "replay", self._replay)
        tensor = torch.Tensor
        self._wrap(tensor, "record_stream", self._record_stream, "Tensor.record_stream")
        for name in ("item", "tolist", "__bool__"):
            self._wrap(tensor, name, self._tensor_sync(name), capture_only=True)
        self._wrap(tensor, "cpu", self._tensor_cpu, capture_only=True)
        self._wrap(tensor, "to", self._tensor_to, capture_only=True)
        self._wrap(tensor, "cuda", self._tensor_cuda, capture_only=True)
        self._wrap(tensor, "copy_", self._tensor_copy, capture_only=True)
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
            is_event = generic is getattr(torch, "Event", None)
            hooks: dict[str, tuple[Callable[..., Any], str]] = {
                "record": (self._event_record, "Event.record"),
                "wait": (self._event_wait, "Event.wait"),
                "query": (
                    (self._event_sync, "Event.query/synchronize")
                    if is_event
                    else (self._stream_sync, "Stream.synchronize/query")
                ),
                "synchronize": (
                    (self._event_sync, "Event.query/synchronize")
                    if is_event
                    else (self._stream_sync, "Stream.synchronize/query")
                ),
                "wait_event": (self._stream_wait_event, "Stream.wait_event"),
                "wait_stream": (self._stream_wait_stream, "Stream.wait_stream"),
                "record_event": (self._stream_record_event, "Stream.record_event"),
            }
            for name in names:
                hook, count = hooks[name]
                nesting = _INNER if is_event else _OUTER
                self._wrap(generic, name, hook, count, nesting, one_argument=True)
        if self.races:
            self._watch_races()

    def uninstall(self) -> None:
        self._close_escape_window()
        self._unwatch_races()
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
        count: str | None = None,
        nesting: int = _ALONE,
        static: bool = False,
        capture_only: bool = False,
        one_argument: bool = False,
    ) -> None:
        """Replace `owner.name` by a wrapper that calls `hook(original, *args, **kwargs)`.

        `count` names the call in `counts`. `nesting` says how the wrapper treats torch's own
        re-entrant calls (`_OUTER`: its original calls other watched methods, which then go
        straight to theirs; `_INNER`: such a call is made inside an `_OUTER` one). A
        `capture_only` hook checks nothing outside a capture: while none is live anywhere the
        wrapper calls the original without it (the eager forward's fast path). `one_argument`:
        the method takes at most one argument besides its object (the per-layer calls: see
        `_one_argument_wrapper`)."""
        owned = name in vars(owner)
        if static and not owned:
            return  # an inherited __new__ (a stand-in class): nothing of ours to note
        raw = vars(owner)[name] if owned else getattr(owner, name, None)
        if raw is None:
            self.limitations.append(f"{getattr(owner, '__name__', owner)} has no {name}")
            return
        original = raw.__func__ if isinstance(raw, staticmethod) else raw
        if static:
            wrapper = self._constructor_wrapper(hook, original)
        elif one_argument and count is not None and nesting in (_INNER, _OUTER):
            wrapper = self._one_argument_wrapper(hook, original, count, nesting)
        else:
            wrapper = self._wrapper(hook, original, count, nesting, capture_only)
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

    def _wrapper(
        self,
        hook: Callable[..., Any],
        original: Callable[..., Any],
        count: str | None,
        nesting: int,
        capture_only: bool,
    ) -> Callable[..., Any]:
        # The code an eager forward runs at every watched call: one closure per kind, with
        # what it needs bound as locals, doing no more than its kind needs.
        counts, guard, sanitizer = self._counts, self._guard, self
        if count is not None:
            counts.setdefault(count, 0)
        if nesting == _OUTER:

            def outer(*args: Any, **kwargs: Any) -> Any:
                if guard.busy:
                    return original(*args, **kwargs)
                if count is not None:
                    counts[count] += 1
                guard.busy = True
                try:
                    return hook(original, *args, **kwargs)
                finally:
                    guard.busy = False

            return outer
        if nesting == _INNER:

            def inner(*args: Any, **kwargs: Any) -> Any:
                if guard.busy:
                    return original(*args, **kwargs)
                if count is not None:
                    counts[count] += 1
                return hook(original, *args, **kwargs)

            return inner
        if capture_only:

            def unless_eager(*args: Any, **kwargs: Any) -> Any:
                if count is not None:
                    counts[count] += 1
                if sanitizer._capture is None:
                    return original(*args, **kwargs)
                return hook(original, *args, **kwargs)

            return unless_eager

        def alone(*args: Any, **kwargs: Any) -> Any:
            if count is not None:
                counts[count] += 1
            return hook(original, *args, **kwargs)

        return alone

    def _one_argument_wrapper(
        self,
        hook: Callable[..., Any],
        original: Callable[..., Any],
        count: str,
        nesting: int,
    ) -> Callable[..., Any]:
        """The wrapper of a method of at most one argument (`Event.record(stream=None)`,
        `Stream.wait_event(event)`, ...), called positionally without packing its arguments:
        these are the calls an offloader makes per layer. Keyword calls take the general one."""
        general = self._wrapper(hook, original, count, nesting, False)
        counts, guard = self._counts, self._guard
        if nesting == _OUTER:

            def outer(obj: Any, arg: Any = _MISSING, **kwargs: Any) -> Any:
                if kwargs:
                    return (
                        general(obj, **kwargs) if arg is _MISSING else general(obj, arg, **kwargs)
                    )
                if guard.busy:
                    return original(obj) if arg is _MISSING else original(obj, arg)
                counts[count] += 1
                guard.busy = True
                try:
                    return hook(original, obj) if arg is _MISSING else hook(original, obj, arg)
                finally:
                    guard.busy = False

            return outer

        def inner(obj: Any, arg: Any = _MISSING, **kwargs: Any) -> Any:
            if kwargs:
                return general(obj, **kwargs) if arg is _MISSING else general(obj, arg, **kwargs)
            if guard.busy:
                return original(obj) if arg is _MISSING else original(obj, arg)
            counts[count] += 1
            return hook(original, obj) if arg is _MISSING else hook(original, obj, arg)

        return inner

    def _constructor_wrapper(
        self, hook: Callable[..., Any], original: Callable[..., Any]
    ) -> Callable[..., Any]:
        """`Event.__new__`: the hook only notes `external=True` (the fourth argument)."""

        def constructor(cls: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs or len(args) >= 4:
                return hook(original, cls, *args, **kwargs)
            return original(cls, *args)

        return constructor

    # --- bookkeeping -------------------------------------------------------------------------

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _current_stream(self) -> Any:
        return self._torch.cuda.current_stream()

    def _in_capture(self) -> _Capture | None:
        """The active capture, if the calling thread is the one capturing."""
        capture = self._capture
        if capture is None or capture.thread != get_ident():
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
        """`stream` None: the current stream. Outside a capture the stream is not looked up and
        the record is the one shared by every eager record made at the same call site.

        An eager record's stack is needed only if a capture later waits on the event (OFL101's
        second stack). Walking the whole stack at every eager record was most of what the
        sanitizer cost an eager forward, so the record is made once per call site, told apart by
        the innermost two frames outside this module (code and offset): its outer frames are
        those of the first record made there."""
        capture = self._capture
        if capture is not None and capture.thread == get_ident():
            key = _stream_key(stream if stream is not None else self._current_stream())
            in_capture = capture.number if key in capture.members else None
            record = _EventRecord(in_capture, key, self._next(), _stack())
        else:
            frame = _first_outside(sys._getframe(2))  # (past this method and its hook)
            caller = frame.f_back if frame is not None else None
            site = (
                id(frame.f_code) if frame is not None else 0,
                frame.f_lasti if frame is not None else -1,
                id(caller.f_code) if caller is not None else 0,
                caller.f_lasti if caller is not None else -1,
            )
            shared = self._eager_records.get(site)
            if shared is None:
                # its stack holds both codes: their ids stay theirs while it is kept
                shared = _EventRecord(None, None, 0, _frames_from(frame))
                if len(self._eager_records) < _MAX_EAGER_SITES:
                    self._eager_records[site] = shared
            record = shared
        # (not contextlib.suppress: this runs at every record of an eager forward)
        try:  # noqa: SIM105
            setattr(event, self._key, record)
        except (AttributeError, TypeError):
            pass  # an event type without a __dict__: its waits are not checked

    def _event_record(self, original: Any, event: Any, stream: Any = None) -> Any:
        result = original(event, stream) if stream is not None else original(event)
        if self.enabled:
            self._note_record(event, stream)
        return result

    def _check_wait(self, waiter: Any, event: Any, what: str) -> None:
        """`waiter` None: the current stream (looked up only inside a capture)."""
        record: _EventRecord | None = getattr(event, self._key, None)
        if record is None:
            return  # never recorded (a no-op wait), or recorded before the sanitizer
        capture = self._capture
        if capture is not None and capture.thread != get_ident():
            capture = None
        if record.capture is None and capture is None:
            return  # an eager wait on an eager record: the eager forward's fast path
        if getattr(event, "_offlint_external", False):
            return
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
        if self.enabled:
            record = getattr(event, self._key, None)
            # (an eager wait on an eager record, no capture live: nothing to check)
            if record is not None and (record.capture is not None or self._capture is not None):
                self._check_wait(stream, event, "Event.wait()")
        return original(event, stream) if stream is not None else original(event)

    def _event_sync(self, original: Any, event: Any) -> Any:
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
        if self.enabled:
            record = getattr(event, self._key, None)
            if record is not None and (record.capture is not None or self._capture is not None):
                self._check_wait(stream, event, "Stream.wait_event()")
        return original(stream, event)

    def _stream_wait_stream(self, original: Any, stream: Any, other: Any) -> Any:
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
        result = original(stream, event) if event is not None else original(stream)
        if self.enabled:
            self._note_record(result if result is not None else event, stream)
        return result

    def _stream_sync(self, original: Any, stream: Any) -> Any:
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
                try:
                    device = self._torch._C._nn._parse_to(*args, **kwargs)[0]
                except Exception:
                    device = None  # arguments torch itself will reject: its error stands
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
        before = self._active_blocks()
        result = original(graph, *args, **kwargs)
        self._captures += 1
        capture = _Capture(self._captures, None, get_ident(), _stack())
        capture.origin = _stream_key(self._current_stream())
        capture.members[capture.origin] = self._next()
        capture.blocks_before = before
        self._capture = capture
        return result

    def _capture_end(self, original: Any, graph: Any) -> Any:
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

    # --- OFL205: races between streams, named by PyTorch's CUDA sanitizer (opt-in) ------------

    def _watch_races(self) -> None:
        """Turn CSAN on and take its findings: its event handler's check of each kernel launch
        hands the unordered pairs here (CSAN itself would print them and raise its own error).
        CSAN's tracing callbacks are registered once, when torch.cuda._sanitizer is imported:
        its one module-level sanitizer is used, never a second."""
        try:
            from torch.cuda import _gpu_trace as gpu_trace
            from torch.cuda import _sanitizer as csan

            owner = csan.cuda_sanitizer
            handler: Any = owner.dispatch.event_handler
            launch = handler._handle_kernel_launch
            unordered = csan.UnsynchronizedAccessError
        except Exception as exc:
            self.limitations.append(
                f"races between streams not watched: PyTorch's CUDA sanitizer is not usable "
                f"here ({type(exc).__name__}: {exc})"
            )
            return
        previous = vars(handler).get("_handle_kernel_launch")

        def checked(*args: Any, **kwargs: Any) -> Any:
            errors = launch(*args, **kwargs)
            races = [error for error in errors if isinstance(error, unordered)]
            if races and self.enabled:
                self._race(races[0])  # mode "raise": CaptureHazard out of the racing op
            return [error for error in errors if not isinstance(error, unordered)]

        handler._handle_kernel_launch = checked
        was_enabled = bool(owner.enabled)
        if not was_enabled:
            _attach_csan()
            type(handler).__init__(handler)  # what it saw while detached is stale: start afresh
            owner.enable()
        self._races_undo = (handler, previous, owner, was_enabled, gpu_trace)

    def _unwatch_races(self) -> None:
        undo, self._races_undo = self._races_undo, None
        if undo is None:
            return
        handler, previous, owner, was_enabled, gpu_trace = undo
        if not was_enabled:
            with contextlib.suppress(Exception):
                owner.disable()
            _detach_csan(handler, gpu_trace)
        if previous is not None:
            handler._handle_kernel_launch = previous
        else:
            with contextlib.suppress(AttributeError):
                del handler._handle_kernel_launch

    def _race(self, error: Any) -> None:
        current, previous = error.current_access, error.previous_access
        capture = self._in_capture()
        self._violate(
            Violation(
                "OFL205",
                f"{_access_text(current)} on stream {current.stream} is not ordered after "
                f"{_access_text(previous)} on stream {previous.stream}: no event or stream "
                "wait between them",
                _csan_frames(current.stack_trace),
                "the other stream's access",
                _csan_frames(previous.stack_trace),
                capture.number if capture is not None else None,
                "make the consuming stream wait for the producing one before it uses the "
                "tensor (`torch.cuda.current_stream().wait_stream(side)`, or `wait_event` on "
                "an event recorded after the copy), and `record_stream` a tensor another stream "
                "still uses",
            )
        )


# CSAN's tracing callbacks taken off while no sanitizer has it on: (registry, callback)
_CSAN_DETACHED: list[tuple[Any, Any]] = []


def _detach_csan(handler: Any, gpu_trace: Any) -> None:
    """PyTorch registers CSAN's tracing callbacks when torch.cuda._sanitizer is imported and never
    removes them; they take a Python stack at every allocation whether CSAN is on or not (on the
    H200 an eager forward ran 2.9x slower after a races=True run). Off with CSAN: off with them."""
    for registry in vars(gpu_trace).values():
        callbacks = getattr(registry, "callback_list", None)
        if not isinstance(callbacks, list):
            continue
        for callback in list(callbacks):
            if getattr(callback, "__self__", None) is handler:
                callbacks.remove(callback)
                _CSAN_DETACHED.append((registry, callback))


def _attach_csan() -> None:
    while _CSAN_DETACHED:
        registry, callback = _CSAN_DETACHED.pop()
        if callback not in registry.callback_list:
            registry.callback_list.append(callback)


def _access_text(access: Any) -> str:
    kind = (
        "a write to" if str(getattr(access.type, "name", access.type)) == "WRITE" else "a read of"
    )
    operator = str(access.operator).split("(")[0]
    return f"{kind} {', '.join(access.aliases) or 'a tensor'} by {operator}"


def _csan_frames(summary: Any) -> Frames:
    """CSAN's stack (a traceback.StackSummary, outermost first) as Sites, innermost first."""
    sites = []
    for frame in reversed(list(summary or ())):
        line = frame.lineno or 0
        code = (frame.line or linecache.getline(frame.filename, line) or "").strip()
        sites.append(Site(frame.filename, line, frame.name, code))
    return tuple(sites)


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
def capture_sanitizer(
    mode: str = "raise", escapes: bool = True, races: bool = False
) -> Iterator[CaptureSanitizer]:
    """`with capture_sanitizer(): run_the_graph_runner()` — the context manager for tests."""
    sanitizer = CaptureSanitizer(mode, escapes, races)
    sanitizer.install()
    try:
        yield sanitizer
    finally:
        sanitizer.uninstall()
