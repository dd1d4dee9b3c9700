"""The capture sanitizer's bookkeeping without a GPU: its hooks driven with stand-in streams,
events and graphs (what CUDA would answer is tests/test_probe_sanitizer_gpu.py's business), and
installing/uninstalling it on the real torch classes."""

from __future__ import annotations

import types
from typing import Any

import pytest

from offlint.probing.sanitizer import CaptureHazard, CaptureSanitizer

torch = pytest.importorskip("torch")


class Stream:
    def __init__(self, handle: int) -> None:
        self.cuda_stream = handle


class Event:
    pass


def noop(*args: Any, **kwargs: Any) -> None:
    return None


class Harness:
    def __init__(self, mode: str = "raise") -> None:
        self.current = Stream(1)
        self.sanitizer = CaptureSanitizer(mode, escapes=False)
        fake_cuda = types.SimpleNamespace(current_stream=lambda: self.current)
        self.sanitizer._torch = types.SimpleNamespace(cuda=fake_cuda)
        self.graph = object()

    def begin(self) -> None:
        self.sanitizer._capture_begin(noop, self.graph)

    def end(self) -> None:
        self.sanitizer._capture_end(noop, self.graph)

    def record(self, event: Event, stream: Stream | None = None) -> None:
        self.sanitizer._event_record(noop, event, stream)

    def wait(self, event: Event) -> None:
        self.sanitizer._event_wait(noop, event)

    def wait_stream(self, waiter: Stream, waited: Stream) -> None:
        self.sanitizer._stream_wait_stream(noop, waiter, waited)

    def enter(self, stream: Stream) -> None:
        self.sanitizer._stream_enter(noop, types.SimpleNamespace(stream=stream))


def test_a_wait_in_capture_on_an_eager_record_stops_with_both_lines() -> None:
    h = Harness()
    side, event = Stream(2), Event()
    h.record(event, side)  # the prefetch before the capture
    h.begin()
    with pytest.raises(CaptureHazard) as caught:
        h.wait(event)  # the consumer inside it
    violation = caught.value.violation
    assert violation.rule == "OFL101"
    assert "905" in violation.prevents
    data = violation.to_json()
    # (innermost first: the harness's own line, then the test's)
    assert "h.wait(event)  # the consumer inside it" in [s["code"] for s in data["here"]]
    other = [s["code"] for s in data["other"]]
    assert "h.record(event, side)  # the prefetch before the capture" in other
    text = str(caught.value)
    assert "OFL101 wait-on-uncaptured-event" in text and "offlint rule OFL101" in text


def test_fork_and_join_inside_the_capture_is_legal() -> None:
    h = Harness()
    side, done = Stream(2), Event()
    h.begin()
    h.wait_stream(side, h.current)  # fork
    h.enter(side)  # work on the side stream
    h.record(done, side)
    h.wait(done)  # join through the event
    h.end()
    assert h.sanitizer.violations == []


def test_a_fork_never_joined_is_ofl103_at_the_capture_end() -> None:
    h = Harness()
    side = Stream(2)
    h.begin()
    h.wait_stream(side, h.current)
    h.enter(side)
    with pytest.raises(CaptureHazard) as caught:
        h.end()
    assert caught.value.violation.rule == "OFL103"
    other = caught.value.violation.to_json()["other"]
    assert any(site["code"].startswith("h.wait_stream(side") for site in other)


def test_waiting_on_an_unforked_stream_and_working_on_one() -> None:
    h = Harness()
    h.begin()
    with pytest.raises(CaptureHazard, match="OFL102"):
        h.wait_stream(h.current, Stream(2))
    h = Harness()
    h.begin()
    with pytest.raises(CaptureHazard, match="OFL104"):
        h.enter(Stream(3))


def test_an_event_from_an_ended_capture_waited_eagerly_is_ofl202() -> None:
    h = Harness()
    event = Event()
    h.begin()
    h.record(event)
    h.end()
    with pytest.raises(CaptureHazard) as caught:
        h.wait(event)
    assert caught.value.violation.rule == "OFL202"
    assert "invalid argument" in caught.value.violation.prevents


def test_never_recorded_and_external_events_are_legal_waits() -> None:
    h = Harness()
    external = Event()
    external._offlint_external = True  # type: ignore[attr-defined]  # what Event(external=True) sets
    h.record(external, Stream(2))
    h.begin()
    h.wait(Event())
    h.wait(external)
    h.end()
    assert h.sanitizer.violations == []


def test_record_mode_keeps_going_and_keeps_one_violation_per_rule_and_line() -> None:
    h = Harness(mode="record")
    side, event = Stream(2), Event()
    h.record(event, side)
    h.begin()
    for _ in range(3):
        h.wait(event)  # one line, three calls
    h.wait_stream(side, h.current)
    h.enter(side)
    h.end()  # the fork is not joined
    assert [v.rule for v in h.sanitizer.violations] == ["OFL101", "OFL103"]


def test_paused_checks_nothing() -> None:
    h = Harness()
    event = Event()
    h.record(event, Stream(2))
    h.begin()
    with h.sanitizer.paused():
        h.wait(event)
    assert h.sanitizer.violations == []


def test_install_and_uninstall_restore_torch_exactly() -> None:
    watched = [
        (torch.Tensor, "to"),
        (torch.Tensor, "copy_"),
        (torch.Tensor, "__bool__"),
        (torch.Tensor, "item"),
        (torch.cuda, "synchronize"),
        (torch.cuda.Event, "record"),
        (torch.cuda.Event, "__new__"),
        (torch.cuda.Stream, "wait_stream"),
        (torch.cuda.StreamContext, "__enter__"),
        (torch.cuda.CUDAGraph, "capture_begin"),
    ]
    before = [(owner, name, vars(owner).get(name), getattr(owner, name)) for owner, name in watched]
    sanitizer = CaptureSanitizer()
    with sanitizer:
        assert torch.Tensor.to is not before[0][3]
        x = torch.ones(3)
        assert bool(x.sum() > 0) and x.to(torch.float64).dtype == torch.float64
        assert x[0].item() == 1.0
    for owner, name, own, value in before:
        assert vars(owner).get(name) is own, (owner, name)
        assert getattr(owner, name) == value, (owner, name)
    assert sanitizer.violations == []


def test_timing_an_event_recorded_in_a_capture_is_ofl107() -> None:
    h = Harness()
    start, end = Event(), Event()
    h.begin()
    h.record(start)  # the captured step's timing events
    h.record(end)
    h.end()
    with pytest.raises(CaptureHazard) as caught:
        h.sanitizer._event_elapsed(noop, start, end)
    violation = caught.value.violation
    assert violation.rule == "OFL107"
    assert "elapsed_time" in violation.what
    assert any(
        site["code"] == "h.record(start)  # the captured step's timing events"
        for site in violation.to_json()["other"]
    )
    # Events recorded eagerly time as ever.
    eager_start, eager_end = Event(), Event()
    h.record(eager_start)
    h.record(eager_end)
    h.sanitizer._event_elapsed(noop, eager_start, eager_end)
    assert len(h.sanitizer.violations) == 1
