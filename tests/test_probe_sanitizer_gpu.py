"""The capture sanitizer on a real GPU: each illegal pair stops before CUDA's error with the
rule, both stacks and the error it prevents; legal patterns pass untouched."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from offlint.probing.sanitizer import CaptureHazard, capture_sanitizer

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

REPO = Path(__file__).resolve().parent.parent


def _stop(body: Callable[[Any], None]) -> CaptureHazard:
    # A capture failure can leave torch's shared default capture stream unusable for the next
    # capture of the process: each test captures on a stream of its own.
    torch.cuda.set_stream(torch.cuda.default_stream())
    graph = torch.cuda.CUDAGraph()
    with capture_sanitizer(), pytest.raises(CaptureHazard) as caught:
        body(graph)
    torch.cuda.synchronize()  # the context survived: the offending call was never made
    return caught.value


def test_wait_on_an_event_recorded_before_the_capture_is_ofl101() -> None:
    side = torch.cuda.Stream()
    event = torch.cuda.Event()
    x = torch.ones(16, device="cuda")

    def body(graph: Any) -> None:
        with torch.cuda.stream(side):
            x.add_(1)
            event.record()  # recorded eagerly
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            event.wait()
            x.mul_(2)

    hazard = _stop(body)
    violation = hazard.violation
    assert violation.rule == "OFL101"
    assert "905" in violation.prevents
    assert violation.to_json()["here"][0]["code"] == "event.wait()"
    assert violation.to_json()["other"][0]["code"] == "event.record()  # recorded eagerly"


def test_a_fork_not_joined_is_ofl103_after_cudas_904() -> None:
    side = torch.cuda.Stream()
    x = torch.ones(16, device="cuda")

    def body(graph: Any) -> None:
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                x.add_(1)

    hazard = _stop(body)
    assert hazard.violation.rule == "OFL103"
    assert hazard.violation.to_json()["other"][0]["code"].startswith("side.wait_stream(")


def test_host_sync_and_pageable_copy_in_capture() -> None:
    x = torch.ones(16, device="cuda")

    def sync(graph: Any) -> None:
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            x.mul_(2)
            torch.cuda.current_stream().synchronize()

    assert _stop(sync).violation.rule == "OFL105"
    host = torch.ones(16)

    def copy(graph: Any) -> None:
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            x.copy_(host, non_blocking=True)

    assert _stop(copy).violation.rule == "OFL106"


def test_eager_wait_on_an_event_recorded_in_an_ended_capture_is_ofl202() -> None:
    event = torch.cuda.Event()
    x = torch.ones(16, device="cuda")

    def body(graph: Any) -> None:
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            x.mul_(2)
            event.record()
        event.wait()

    assert _stop(body).violation.rule == "OFL202"


def test_an_eager_read_of_a_capture_made_tensor_before_replay_is_ofl201() -> None:
    x = torch.ones(16, device="cuda")
    made: list[Any] = []

    def body(graph: Any) -> None:
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            made.append(x * 3)
        made[0].sum()  # eager, before any replay: reads garbage

    assert _stop(body).violation.rule == "OFL201"


def test_legal_patterns_pass() -> None:
    side = torch.cuda.Stream()
    x = torch.ones(16, device="cuda")
    graph = torch.cuda.CUDAGraph()
    never_recorded = torch.cuda.Event()
    external = torch.cuda.Event(external=True)
    with torch.cuda.stream(side):
        x.add_(1)
        external.record()
    with capture_sanitizer() as sanitizer:
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            never_recorded.wait()
            external.wait()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                y = x * 2
            torch.cuda.current_stream().wait_stream(side)
            out = y + 1
        graph.replay()
        out.sum()
        torch.cuda.synchronize()
    assert sanitizer.violations == []
    assert sanitizer.counts["CUDAGraph.capture_begin"] == 1


def test_the_command_line_names_the_sglang_line_pair(tmp_path: Path) -> None:
    script = tmp_path / "runner.py"
    script.write_text(
        textwrap.dedent("""\
        import torch
        from offlint.probing.examples.sglang_offload import build
        probed = build(fixture="original", layers=8, hidden=1024)
        x = probed.make_inputs(64)
        with torch.no_grad():
            probed.model(x)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
                    probed.model(x)
            except Exception as exc:  # a graph runner falling back to eager
                print("fell back:", type(exc).__name__)
        """)
    )
    report = tmp_path / "report.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "offlint.probing",
            "--sanitize",
            "-o",
            str(report),
            "--",
            sys.executable,
            str(script),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    document = json.loads(report.read_text())
    (violation,) = document["violations"]
    assert violation["rule"] == "OFL101"
    assert violation["here"][0]["code"].split("#")[0].strip() == "self._load_event.wait()"
    assert violation["other"][0]["code"] == "self._load_event.record()"
    assert "fell back: CaptureHazard" in completed.stdout


def _eager_race() -> Any:
    """A side stream's result read on the current stream with no wait between (diffusers'
    block-level offloading with use_stream=True in small)."""
    side = torch.cuda.Stream()
    x = torch.ones(1 << 16, device="cuda")
    buffer = torch.empty_like(x)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        buffer.copy_(x)  # produced on the side stream
    return buffer.sum()  # consumed on the current stream: no wait_stream, no event


def test_an_eager_race_between_streams_is_ofl205_with_races_on() -> None:
    with capture_sanitizer(races=True), pytest.raises(CaptureHazard) as caught:
        _eager_race()
    torch.cuda.synchronize()
    violation = caught.value.violation
    assert violation.rule == "OFL205"
    assert "no CUDA error" in violation.prevents
    data = violation.to_json()
    assert data["here"][0]["code"].startswith("return buffer.sum()")
    assert data["other"][0]["code"].startswith("buffer.copy_(x)")
    with capture_sanitizer() as sanitizer:  # off by default: the capture checks only
        _eager_race()
        torch.cuda.synchronize()
    assert sanitizer.violations == []


def test_the_races_flag_of_the_sanitized_program(tmp_path: Path) -> None:
    script = tmp_path / "racy.py"
    script.write_text(
        textwrap.dedent("""\
        import torch
        side = torch.cuda.Stream()
        x = torch.ones(1 << 16, device="cuda")
        buffer = torch.empty_like(x)
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            buffer.copy_(x)
        print("sum", buffer.sum().item())
        """)
    )
    report = tmp_path / "report.json"
    base = [sys.executable, "-m", "offlint.probing.sanitize_main", "--report", str(report)]
    completed = subprocess.run(
        [*base[:3], "--races", *base[3:], str(script)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    (violation,) = json.loads(report.read_text())["violations"]
    assert violation["rule"] == "OFL205"
    assert violation["here"][0]["code"] == 'print("sum", buffer.sum().item())'
    assert violation["other"][0]["code"] == "buffer.copy_(x)"
    completed = subprocess.run(
        [*base, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert json.loads(report.read_text())["violations"] == []
