"""Streams, events and pinned buffers handed from one function to another of the same module, and
result objects made per call (DeepSpeed AutoEP's pending split plan is the real case); event forks
left to a later join in a tree that captures in segments (vLLM's prefetch offloader)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue

ALL = frozenset(load_catalogue())

# a layer that starts a device-to-host copy of routing counts on a side stream and hands the
# pending result to its forward, which waits for it on the host
PENDING_PLAN = """\
import torch


class _Pending:
    def __init__(self, host, ready_event):
        self._host = host
        self._ready = ready_event
        self._plan = None

    def wait(self):
        if self._plan is None:
            self._ready.synchronize()  # OFL107 when the event reaches here
            self._plan = self._host.tolist()  # a pinned host buffer: no device sync
        return self._plan


def _start(counts, host, ready_event, copy_stream):
    dep = torch.cuda.Event()
    dep.record(torch.cuda.current_stream())
    copy_stream.wait_event(dep)  # OFL103 when the hand-off only waits on the host
    with torch.cuda.stream(copy_stream):
        host.copy_(counts, non_blocking=True)
        ready_event.record(copy_stream)
    return _Pending(host, ready_event=ready_event)


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.copy_stream = torch.cuda.Stream()
        self.ready = torch.cuda.Event()
        self.host = torch.empty(8, dtype=torch.int64, pin_memory=True)

    def forward(self, x):
        pending = _start(x, self.host, self.ready, self.copy_stream)
        plan = self._wait(pending)
        return x * len(plan)

    def _wait(self, pending: _Pending):
        return pending.wait()
"""


def _found(source: str) -> list[tuple[int, str]]:
    report = check_source(textwrap.dedent(source).encode(), "case.py", FileSettings(select=ALL))
    assert not report.errors, report.errors
    return sorted((d.location.line, d.code) for d in report.diagnostics)


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_an_event_handed_to_a_result_object_is_an_event_there() -> None:
    found = _found(PENDING_PLAN)
    assert (_line(PENDING_PLAN, "self._ready.synchronize()"), "OFL107") in found


def test_a_result_object_made_per_call_is_not_a_one_time_set_up() -> None:
    """`if self._plan is None:` on an object made in each forward runs in every capture."""
    found = _found(PENDING_PLAN)
    assert any(line == _line(PENDING_PLAN, "self._ready.synchronize()") for line, _ in found)
    same_test_on_a_long_lived_object = PENDING_PLAN.replace(
        "    return _Pending(host, ready_event=ready_event)", "    return None"
    )
    assert not any(line == _line(PENDING_PLAN, "self._ready.synchronize()") for line, _ in _found(same_test_on_a_long_lived_object))


def test_a_pinned_buffer_handed_down_is_not_a_device_sync() -> None:
    found = _found(PENDING_PLAN)
    assert not any(line == _line(PENDING_PLAN, "self._host.tolist()") for line, _ in found)
    pageable = PENDING_PLAN.replace(", pin_memory=True)", ")")  # no longer known pinned
    assert any(line == _line(PENDING_PLAN, "self._host.tolist()") for line, _ in _found(pageable))


def test_a_fork_whose_event_is_only_waited_on_the_host_is_unjoined() -> None:
    fork = _line(PENDING_PLAN, "copy_stream.wait_event(dep)")
    assert (fork, "OFL103") in _found(PENDING_PLAN)
    # a caller that gets the event itself can join it on the device: the hand-off is the join
    handed = PENDING_PLAN.replace("    return _Pending(host, ready_event=ready_event)", "    return ready_event")
    assert (fork, "OFL103") not in _found(handed)


# -- segmented capture: an event fork joined by a capture-aware join of a later call ----------

PREFETCHER = """\
import torch


class OffloadedBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.copy_stream = torch.cuda.Stream()
        self.done = torch.cuda.Event()
        self.buf = torch.empty(4, device="cuda")
        self.src = torch.empty(4, pin_memory=True)

    def forward(self, x):
        self._start(self.buf, self.src)
        return x + 1

    def _start(self, dst, src):
        fork = torch.cuda.Event()
        torch.cuda.current_stream().record_event(fork)
        self.copy_stream.wait_event(fork)
        with torch.cuda.stream(self.copy_stream):
            dst.copy_(src, non_blocking=True)
        self.done.record(self.copy_stream)

    def join_after_forward(self):
        if torch.cuda.is_current_stream_capturing():
            torch.cuda.current_stream().wait_event(self.done)
"""

SEGMENTED = """\
class BreakableCUDAGraphCapture:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
"""


def _check_tree(root: Path) -> list[tuple[str, int, str]]:
    done = subprocess.run(
        [sys.executable, "-m", "offlint", "check", "pkg", "--output-format", "offlint-json", "--exit-zero", *("--select", "OFL103")],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [(d["filename"], d["location"]["row"], d["code"]) for d in json.loads(done.stdout)["diagnostics"]]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in {"pkg/__init__.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "pyproject.toml").write_text("[tool.offlint]\n")
    return tmp_path


def test_an_event_fork_left_to_a_later_join_is_unjoined_when_the_tree_captures_in_segments(tmp_path: Path) -> None:
    fork = _line(PREFETCHER, "self.copy_stream.wait_event(fork)")
    alone = _tree(tmp_path / "alone", {"pkg/prefetch.py": PREFETCHER})
    assert _check_tree(alone) == []  # the module's capture-aware join ends the capture's fork
    segmented = _tree(tmp_path / "segmented", {"pkg/prefetch.py": PREFETCHER, "pkg/breakable.py": SEGMENTED})
    assert _check_tree(segmented) == [("pkg/prefetch.py", fork, "OFL103")]
    assert _check_tree(segmented) == [("pkg/prefetch.py", fork, "OFL103")]  # warm: the same


def test_a_wait_stream_fork_is_joined_by_each_segment_end(tmp_path: Path) -> None:
    """The segmented capture joins `wait_stream` forks at each segment's end, not event forks."""
    by_stream = PREFETCHER.replace(
        "        fork = torch.cuda.Event()\n        torch.cuda.current_stream().record_event(fork)\n"
        "        self.copy_stream.wait_event(fork)\n",
        "        self.copy_stream.wait_stream(torch.cuda.current_stream())\n",
    )
    segmented = _tree(tmp_path, {"pkg/prefetch.py": by_stream, "pkg/breakable.py": SEGMENTED})
    assert _check_tree(segmented) == []


# -- a start/consume pair: the consumer joins what the start of the same pipeline forked ------

START_CONSUME = """\
import torch


class Prefetch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._stream = torch.cuda.Stream()
        self._state = None

    def start(self, ids, table):
        if self._state is not None:
            raise RuntimeError("not consumed")
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            rows = table[ids]
        self._state = rows

    def forward(self, x):
        if self._state is None:
            raise RuntimeError("missing")
        rows = self._state
        torch.cuda.current_stream().wait_stream(self._stream)
        self._state = None
        return x + rows
"""


def test_a_join_that_takes_over_the_forks_payload_is_not_a_wait_on_unforked_work() -> None:
    join = _line(START_CONSUME, "torch.cuda.current_stream().wait_stream(self._stream)")
    assert (join, "OFL102") not in _found(START_CONSUME)
    # a payload some other method also sets says nothing of where the stream was forked
    elsewhere = START_CONSUME.replace(
        "    def forward(self, x):", "    def reset(self, rows):\n        self._state = rows\n\n    def forward(self, x):"
    )
    assert (_line(elsewhere, "torch.cuda.current_stream().wait_stream(self._stream)"), "OFL102") in _found(elsewhere)


def test_syncs_the_projects_sync_checker_allows_are_intended() -> None:
    source = """\
import torch

from engine.sync_debug import gpu_sync_allowed


def attention(q, max_seqlen):
    with gpu_sync_allowed():
        bound = max_seqlen.item()
    return q[:bound] + max_seqlen.item()


def capture(q, max_seqlen):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = attention(q, max_seqlen)
    return g, out
"""
    assert _found(source) == [(_line(source, "q[:bound] + max_seqlen.item()"), "OFL105")]
