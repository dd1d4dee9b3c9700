"""The dataflow fixes of `offlint fix` (issue 14): an event recorded in one call and waited in
another (`event_handoff.py`), an event that can only be made external (`external_event.py`), a
fork with no consumer (`fork_join.py`), a hook that casts its module back (`hook_moves.py`), and
the "not fixed: <reason>" of what they leave.

Each rewrite is run, not only read: the capture simulator below stands in for torch and raises
where CUDA would (905 isolation, 904 unjoined, a wait on an event of an ended capture), so a test
drives eager forwards, a capture, and eager forwards after it through the original and the fixed
code.
"""

from __future__ import annotations

import contextlib
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.fix_rate import DEFAULT_CODES, measure
from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.diagnostics import Confidence
from offlint.fixing.apply import FileFix, FixSettings
from offlint.fixing.loop import fix_source

# these tests fix for an engine that captures whole forwards (`capture-modes = ["whole"]`):
# the rewrites the split capture modes defeat are offered only there (fixing/capture_modes.py)
WHOLE = ("whole",)

# ----------------------------------------------------------------------------- capture simulator
# A stand-in `torch` module that enforces the capture rules of shared/GROUND-TRUTH.md section 1
# on the CPU, for running what `offlint fix` writes: streams, events, forks, joins and one capture
# at a time, no tensors.
#
# - a wait inside a capture on an event recorded outside it raises (905, isolation);
# - an eager wait on an event last recorded inside an ended capture raises (invalid argument);
# - `cur.wait_stream(side)` inside a capture when `side` was never forked into it raises (905);
# - work on a side stream inside a capture that was not forked into it raises (900);
# - a capture that ends with a forked side stream's work not joined raises (904, unjoined);
# - `Event(external=True)` waits and records are legal across capture boundaries.


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


SELECT = frozenset(load_catalogue())
ROOT = Path(__file__).resolve().parent.parent


def _fix(source: str) -> FileFix:
    result = fix_source(source.encode(), "m.py", FixSettings(select=SELECT, min_confidence=Confidence.LOW, capture_modes=WHOLE))
    assert not result.errors, [e.one_line() for e in result.errors]
    return result


def _codes(source: str | bytes) -> list[str]:
    data = source.encode() if isinstance(source, str) else source
    report = check_source(data, "m.py", FileSettings(select=SELECT, min_confidence=Confidence.LOW))
    return [d.code for d in report.diagnostics]


def _load(source: str | bytes, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """Run `source` as a module against a fresh capture simulator."""
    monkeypatch.setitem(sys.modules, "torch", fresh_torch())
    module = types.ModuleType("fixed")
    exec(compile(source, "m.py", "exec"), module.__dict__)
    return module


# ----------------------------------------------------------------------------- event hand-off

HOOKED = """\
import torch


class LayerStreamer:
    def __init__(self, n):
        self.n = n
        self.stream = torch.cuda.Stream()
        self.events = [torch.cuda.Event() for _ in range(n)]
        self.loaded = [None] * n
        self.load(0)

    def load(self, i):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.loaded[i] = ("copy", i, torch.cuda.is_current_stream_capturing())
            self.events[i].record()

    def before_layer(self, i):
        torch.cuda.current_stream().wait_event(self.events[i])
        return self.loaded[i]

    def after_layer(self, i):
        self.loaded[i] = None
        # the last layer prefetches the first one for the next forward
        self.load((i + 1) % self.n)
"""


def _forward(streamer: object, n: int) -> list[object]:
    out = []
    for i in range(n):
        out.append(streamer.before_layer(i))  # type: ignore[attr-defined]
        streamer.after_layer(i)  # type: ignore[attr-defined]
    return out


def test_handoff_fixes_both_findings_and_is_a_fixed_point() -> None:
    assert {"OFL101", "OFL103"} <= set(_codes(HOOKED))
    result = _fix(HOOKED)
    assert result.changed
    assert not {"OFL101", "OFL103"} & set(_codes(result.fixed))
    assert _fix(result.fixed.decode()).fixed == result.fixed
    text = result.fixed.decode()
    # the producer tags where it recorded, the consumer takes the tag, the wrap-around is eager-only
    assert "self.events_captured[i] = torch.cuda.is_current_stream_capturing()" in text
    assert "if self.events_captured.pop(i, None) == capturing:" in text
    assert "if i + 1 < self.n or not torch.cuda.is_current_stream_capturing():" in text
    assert {e.fixer for e in result.edits} == {"event-handoff"}
    assert all(e.safety.value == "unsafe" for e in result.edits)


def test_handoff_original_fails_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load(HOOKED, monkeypatch)
    streamer = module.LayerStreamer(4)
    _forward(streamer, 4)
    with pytest.raises(CaptureError, match="905"), capture():
        _forward(streamer, 4)


def test_handoff_fixed_captures_and_eager_after_capture_reads_eager_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load(_fix(HOOKED).fixed, monkeypatch)
    n = 4
    streamer = module.LayerStreamer(n)
    eager = [("copy", i, False) for i in range(n)]
    assert _forward(streamer, n) == eager
    assert _forward(streamer, n) == eager
    for _ in range(2):  # a second capture right after the first (another batch size)
        with capture():
            assert _forward(streamer, n) == [("copy", i, True) for i in range(n)]
    # eager right after capture: every layer uses a copy made eagerly, none made in the capture
    assert _forward(streamer, n) == eager
    assert _forward(streamer, n) == eager


# ----------------------------------------------------------------------------- external event + fork join

EXTERNAL = """\
import torch


class Prefetcher:
    def __init__(self):
        self.side = torch.cuda.Stream()
        self.ready = torch.cuda.Event()

    def prefetch(self, host):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.ready.record()

    def forward(self, x):
        self.ready.wait()
        return x
"""


def test_event_without_a_repeatable_producer_is_made_external_and_the_fork_joined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert {"OFL101", "OFL103"} <= set(_codes(EXTERNAL))
    result = _fix(EXTERNAL)
    text = result.fixed.decode()
    assert "self.ready = torch.cuda.Event(external=True)" in text
    assert "torch.cuda.current_stream().wait_stream(self.side)" in text
    assert not {"OFL101", "OFL103"} & set(_codes(result.fixed))
    # the fork and the wait on its event are one pair: one fix, planned by both fixers
    assert {e.fixer for e in result.edits} == {"external-event+fork-join"}

    original = _load(EXTERNAL, monkeypatch).Prefetcher()
    original.prefetch("host")
    with pytest.raises(CaptureError, match="905"), capture():
        original.forward(1)

    fixed = _load(result.fixed, monkeypatch).Prefetcher()
    fixed.prefetch("host")
    with capture():
        fixed.forward(1)  # eager record, captured wait: legal on an external event
    with capture():
        fixed.prefetch("host")  # the fork is joined before the capture ends
    fixed.forward(1)  # eager wait after a capture recorded it: legal on an external event


def test_fork_join_only_while_capturing_at_the_end_of_the_work() -> None:
    source = """\
import torch


class Evictor:
    def __init__(self):
        self.side = torch.cuda.Stream()
        self.done = torch.cuda.Event()

    def evict(self, host, dev):
        cur = torch.cuda.current_stream()
        self.side.wait_stream(cur)
        with torch.cuda.stream(self.side):
            host.copy_(dev, non_blocking=True)
        return host
"""
    assert "OFL103" in _codes(source)
    text = _fix(source).fixed.decode()
    assert (
        "            host.copy_(dev, non_blocking=True)\n"
        "        # While capturing, join the fork before this call ends: a capture must not end\n"
        "        # with it open. Eager runs join it where they always did.\n"
        "        if torch.cuda.is_current_stream_capturing():\n"
        "            cur.wait_stream(self.side)\n"
        "        return host\n"
    ) in text
    assert "OFL103" not in _codes(text)


# ----------------------------------------------------------------------------- hook moves

HOOK = """\
import torch


class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

    def post_forward(self, module, output):
        return output


class CastingHook(ModelHook):
    def __init__(self, storage_dtype, compute_dtype):
        self.storage_dtype = storage_dtype
        self.compute_dtype = compute_dtype

    def pre_forward(self, module, *args, **kwargs):
        module.to(dtype=self.compute_dtype)
        return args, kwargs

    def post_forward(self, module, output):
        module.to(dtype=self.storage_dtype)
        return output
"""


def test_hook_that_casts_back_puts_the_kept_tensors_back_while_capturing() -> None:
    before = _codes(HOOK)
    assert "OFL201" in before
    result = _fix(HOOK)
    text = result.fixed.decode()
    assert "self._kept_before_capture = None" in text
    assert "for name, tensor in module.state_dict(keep_vars=True).items():" in text
    assert "        else:\n            module.to(dtype=self.storage_dtype)\n" in text
    assert "OFL201" not in _codes(result.fixed)
    assert _fix(text).fixed == result.fixed


# ----------------------------------------------------------------------------- reasons


def test_a_finding_left_carries_its_reason() -> None:
    source = """\
import torch


class Consumer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x, ready: torch.cuda.Event):
        torch.cuda.current_stream().wait_event(ready)
        return x
"""
    assert "OFL101" in _codes(source)
    result = _fix(source)
    assert not result.changed
    [left] = [n for n in result.not_fixed if n.diagnostic.code == "OFL101"]
    assert "handed in by the caller of `Consumer.forward`" in left.reason


def test_fork_joined_by_another_method_is_left_with_why() -> None:
    source = """\
import torch


class Prefetcher:
    def __init__(self):
        self.side = torch.cuda.Stream()

    def prefetch(self, dev, host):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            dev.copy_(host, non_blocking=True)

    def get(self, dev):
        torch.cuda.current_stream().wait_stream(self.side)
        return dev
"""
    result = _fix(source)
    reasons = [n.reason for n in result.not_fixed if n.diagnostic.code == "OFL103"]
    assert reasons and "`Prefetcher.get` already joins `self.side` in a later call" in reasons[0]


def test_fix_rate_on_the_fixtures_meets_the_bar() -> None:
    """Issue 14's bar on the project's own fixtures: every finding fixed or left with a reason,
    at least 80 % fixed, outputs a second fix leaves alone."""
    paths = sorted((ROOT / "fixtures").rglob("*.py"))
    tally, left, broken = measure(paths, DEFAULT_CODES, capture_modes=WHOLE)
    reported = sum(c["reported"] for c in tally.values())
    fixed = sum(c["fixed"] for c in tally.values())
    assert reported >= 10
    assert not broken
    assert sum(c["left, no reason"] for c in tally.values()) == 0, left
    assert fixed >= 0.8 * reported, left
    # under every capture mode (the default) fewer fixes are sound; each finding left says why
    tally, left, broken = measure(paths, DEFAULT_CODES)
    assert not broken
    assert sum(c["left, no reason"] for c in tally.values()) == 0, left
    assert sum(c["fixed"] for c in tally.values()) < fixed


def test_import_torch_is_added_when_the_module_has_no_torch_binding() -> None:
    source = """\
\"\"\"Doc.\"\"\"
from torch.cuda import Stream, current_stream, stream


class Evictor:
    def __init__(self):
        self.side = Stream()

    def evict(self, host, dev):
        self.side.wait_stream(current_stream())
        with stream(self.side):
            host.copy_(dev, non_blocking=True)
"""
    assert "OFL103" in _codes(source)
    result = _fix(source)
    text = result.fixed.decode()
    assert text.startswith('"""Doc."""\nfrom torch.cuda import Stream, current_stream, stream\nimport torch\n')
    assert "        if torch.cuda.is_current_stream_capturing():\n            current_stream().wait_stream(self.side)\n" in text
    assert "OFL103" not in _codes(result.fixed)
    assert _fix(text).fixed == result.fixed


def test_an_event_taken_out_of_a_collection_is_left_saying_so() -> None:
    """Events kept one per copy in a dict on `self` (DeepSpeed's pending offloads): the rewrite
    cannot tell which copy an entry stands for, and says that, not "outside this class"."""
    from offlint.catalogue import load_catalogue
    from offlint.diagnostics import Confidence
    from offlint.fixing.apply import FIXABLE_RULES, FixSettings
    from offlint.fixing.loop import fix_source

    source = textwrap.dedent(
        """\
        import torch


        class Offloader:
            def __init__(self):
                self.stream = torch.cuda.Stream()
                self.pending = {}

            def offload(self, key, host, device):
                with torch.cuda.stream(self.stream):
                    host.copy_(device, non_blocking=True)
                    event = torch.cuda.Event()
                    event.record()
                self.pending[key] = event

            def drain(self):
                for key, event in self.pending.items():
                    event.wait()
                self.pending.clear()
        """
    ).encode()
    select = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)
    result = fix_source(source, "offloader.py", FixSettings(select=select, min_confidence=Confidence.LOW, capture_modes=WHOLE))
    reasons = [n.reason for n in result.not_fixed if n.diagnostic.code == "OFL101"]
    assert reasons and "comes out of `self.pending`, a collection of events" in reasons[0]
