"""The capture sanitizer's bookkeeping without a GPU: its hooks driven with stand-in streams,
events and graphs (what CUDA would answer is tests/test_probe_sanitizer_gpu.py's business), and
installing/uninstalling it on the real torch classes."""

from __future__ import annotations

import sys
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


# --- the installed wrappers, on a stand-in torch shaped like torch.cuda's Python classes -------


class _EventBase:  # what torch's C event base does: nothing the sanitizer sees
    def record(self, stream: Any) -> None:
        pass

    def wait(self, stream: Any) -> None:
        pass


class StandInEvent(_EventBase):
    made_external = 0

    def __new__(
        cls,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
        external: bool = False,
    ) -> StandInEvent:
        return super().__new__(cls)

    def record(self, stream: Any = None) -> None:
        super().record(stream)

    def wait(self, stream: Any = None) -> None:
        super().wait(stream)


class StandInStream:
    def __init__(self, handle: int) -> None:
        self.cuda_stream = handle

    # torch's own nesting: wait_stream → record_event + wait_event, wait_event → Event.wait
    def wait_event(self, event: StandInEvent) -> None:
        event.wait(self)

    def wait_stream(self, stream: StandInStream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: StandInEvent | None = None) -> StandInEvent:
        event = StandInEvent() if event is None else event
        event.record(self)
        return event


class StandInTensor:
    def copy_(self, source: Any, non_blocking: bool = False) -> str:
        return "copied"


def _stand_in_torch(current: StandInStream) -> types.ModuleType:
    module = types.ModuleType("stand_in_torch")
    module.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        Event=StandInEvent,
        Stream=StandInStream,
        StreamContext=type("StreamContext", (), {"__enter__": lambda self: None}),
        CUDAGraph=type("CUDAGraph", (), {}),
        synchronize=lambda: None,
        current_stream=lambda: current,
    )
    module.Tensor = StandInTensor  # type: ignore[attr-defined]
    return module


def test_installed_wrappers_count_each_call_once_and_let_torchs_nested_calls_through() -> None:
    main, side = StandInStream(1), StandInStream(2)
    before = {name: vars(StandInStream)[name] for name in ("wait_event", "wait_stream")}
    sanitizer = CaptureSanitizer("record", escapes=False)
    sanitizer.install(_stand_in_torch(main))
    try:
        main.wait_stream(side)  # its record_event/wait_event are torch's, not the program's
        assert sanitizer.counts == {"Stream.wait_stream": 1}
        event = StandInEvent()
        event.record(stream=side)  # a keyword call takes the general wrapper, noted as well
        event.record()
        side.wait_event(event)
        event.wait(main)
        assert sanitizer.counts == {
            "Stream.wait_stream": 1,
            "Event.record": 2,
            "Stream.wait_event": 1,
            "Event.wait": 1,
        }
        assert sanitizer._record_of(event) is not None
        assert getattr(StandInEvent(external=True), "_offlint_external", False) is True
        assert not hasattr(StandInEvent(), "_offlint_external")
        # outside a capture the tensor hooks are not even called
        assert StandInTensor().copy_(StandInTensor()) == "copied"
    finally:
        sanitizer.uninstall()
    assert {name: vars(StandInStream)[name] for name in before} == before
    assert "__new__" in vars(StandInEvent) and "record" in vars(StandInEvent)
    assert sanitizer.violations == []


def test_eager_records_share_a_stack_per_call_site_and_keep_each_sites_line() -> None:
    h = Harness()
    event = Event()
    for _ in range(50):
        h.record(event)  # site A, recorded again and again
    h.record(event)  # site B: the last record before the capture
    assert len(h.sanitizer._eager_records) == 2  # one shared record per site, not one per call
    h.begin()
    with pytest.raises(CaptureHazard) as caught:
        h.wait(event)
    other = [site["code"] for site in caught.value.violation.to_json()["other"]]
    assert "h.record(event)  # site B: the last record before the capture" in other
    assert not any("site A" in code for code in other)


def test_a_pageable_to_cuda_in_a_capture_stops_before_the_copy() -> None:
    h = Harness()
    h.sanitizer._torch.__dict__["_C"] = torch._C  # Tensor.to's argument parser
    copies: list[Any] = []
    h.begin()
    with pytest.raises(CaptureHazard) as caught:
        h.sanitizer._tensor_to(lambda *a, **k: copies.append(a), torch.ones(3), "cuda")
    assert caught.value.violation.rule == "OFL106"
    assert copies == []  # the copy PyTorch would reject was not attempted
    h.sanitizer._tensor_to(lambda *a, **k: copies.append(a), torch.ones(3), torch.float64)
    assert len(copies) == 1  # a dtype change stays on the host: no violation


# --- OFL205: races between streams, through PyTorch's CUDA sanitizer ---------------------------


def test_races_are_ofl205_with_both_stacks_and_csan_is_put_back_as_found() -> None:
    csan = pytest.importorskip("torch.cuda._sanitizer")
    handler = csan.cuda_sanitizer.dispatch.event_handler
    was_enabled = csan.cuda_sanitizer.enabled
    sanitizer = CaptureSanitizer("raise", escapes=False, races=True)
    sanitizer._watch_races()  # what install() does when races=True
    # (no tensor op runs below: CSAN's dispatch mode is on and this machine may have no CUDA)
    try:
        assert csan.cuda_sanitizer.enabled
        side, current, pointer = 9001, 9002, 123456
        handler._handle_stream_creation(side)
        handler._handle_stream_creation(current)
        handler._handle_kernel_launch(  # the copy on the side stream
            side, set(), {pointer}, {pointer}, "aten::copy_(Tensor(a!) self)", {pointer: ["self"]}
        )
        with pytest.raises(CaptureHazard) as caught:
            handler._handle_kernel_launch(  # the read on the current stream, no wait between
                current, {pointer}, set(), set(), "aten::sum(Tensor self)", {pointer: ["self"]}
            )
    finally:
        sanitizer._unwatch_races()
    assert csan.cuda_sanitizer.enabled == was_enabled
    assert "_handle_kernel_launch" not in vars(handler)
    from torch.cuda import _gpu_trace

    def attached() -> list[Any]:
        return [
            callback
            for registry in vars(_gpu_trace).values()
            for callback in getattr(registry, "callback_list", [])
            if getattr(callback, "__self__", None) is handler
        ]

    if not was_enabled:
        # off again: CSAN's tracing callbacks (a stack per allocation) are off too...
        assert attached() == []
        again = CaptureSanitizer("record", escapes=False, races=True)
        again._watch_races()
        try:
            # ...and back, with what CSAN knew before forgotten (it missed frees meanwhile)
            assert len(attached()) >= 8
            assert handler.seq_num == 0
        finally:
            again._unwatch_races()
        assert attached() == []
    violation = caught.value.violation
    assert violation.rule == "OFL205"
    assert violation.name == "unsynchronized-side-stream-result"
    assert "wrong numbers" in violation.prevents and "no CUDA error" in violation.prevents
    assert f"a read of self by aten::sum on stream {current}" in violation.what
    assert f"a write to self by aten::copy_ on stream {side}" in violation.what
    data = violation.to_json()
    assert data["here"][0]["code"].startswith("handler._handle_kernel_launch(")
    assert data["here"][0]["line"] > data["other"][0]["line"]  # the read's line, then the copy's


def test_races_are_off_by_default_and_csan_is_left_alone() -> None:
    sanitizer = CaptureSanitizer(escapes=False)
    sanitizer.install(_stand_in_torch(StandInStream(1)))
    try:
        assert sanitizer._races_undo is None
        csan = sys.modules.get("torch.cuda._sanitizer")
        if csan is not None:
            handler = csan.cuda_sanitizer.dispatch.event_handler
            assert "_handle_kernel_launch" not in vars(handler)
    finally:
        sanitizer.uninstall()


def test_the_races_flag_reaches_the_sanitized_program() -> None:
    from offlint.probing.sanitize_command import sanitized_command
    from offlint.probing.sanitize_main import _parse

    argv = sanitized_command(["python", "run.py", "--x"], "r.json", races=True)
    assert argv[1:5] == ["-m", "offlint.probing.sanitize_main", "--races", "--report"]
    invocation = _parse(argv[3:])
    assert invocation.races and invocation.mode == "raise" and invocation.report == "r.json"
    assert (invocation.target, invocation.rest) == ("run.py", ["--x"])
    assert "--races" not in sanitized_command(["python", "run.py"], "r.json")
    assert not _parse(["--record", "-m", "pkg.mod"]).races
