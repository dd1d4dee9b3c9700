"""The pytest plugin of the capture sanitizer on a GPU: a marked test that waits, inside a
capture, on an event recorded before it fails with OFL101 even when it swallows the error (as
a graph runner falling back to eager does); a legal capture passes; record mode reports at the
end; the fixture hands the violations to the test; `races=True` names an eager race between
streams (OFL205), which is not watched by default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_probe_plugin_cpu import plugin_args

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

REPO = Path(__file__).resolve().parent.parent

SUBJECT = """
import pytest
import torch


def _capture_waiting_on_an_eager_event():
    side = torch.cuda.Stream()
    event = torch.cuda.Event()
    x = torch.ones(16, device="cuda")
    with torch.cuda.stream(side):
        x.add_(1)
        event.record()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            event.wait()
            x.mul_(2)
    except Exception:
        pass  # a graph runner falling back to eager
    torch.cuda.synchronize()


@pytest.mark.capture_sanitizer
def test_swallowed_hazard():
    _capture_waiting_on_an_eager_event()


@pytest.mark.capture_sanitizer(mode="record")
def test_recorded_hazard():
    _capture_waiting_on_an_eager_event()


@pytest.mark.capture_sanitizer
def test_legal_capture():
    side = torch.cuda.Stream()
    x = torch.ones(16, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = x * 2
        torch.cuda.current_stream().wait_stream(side)
        out = y + 1
    graph.replay()
    torch.cuda.synchronize()
    assert out.sum().item() == 48


def test_fixture(capture_sanitizer):
    _capture_waiting_on_an_eager_event()
    assert [v.rule for v in capture_sanitizer.violations] == ["OFL101"]


def _eager_race():
    side = torch.cuda.Stream()
    x = torch.ones(1 << 16, device="cuda")
    buffer = torch.empty_like(x)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        buffer.copy_(x)
    return buffer.sum()  # no wait on the side stream


@pytest.mark.capture_sanitizer(races=True)
def test_eager_race_watched():
    _eager_race()


@pytest.mark.capture_sanitizer
def test_eager_race_not_watched_by_default():
    _eager_race()
    torch.cuda.synchronize()
"""


def test_the_plugin_fails_a_test_that_hits_a_capture_hazard(tmp_path: Path) -> None:
    (tmp_path / "test_subject.py").write_text(SUBJECT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            *plugin_args(),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = completed.stdout + completed.stderr
    assert completed.returncode == 1, out
    assert "FAILED test_subject.py::test_swallowed_hazard" in out
    assert "FAILED test_subject.py::test_recorded_hazard" in out
    assert "PASSED test_subject.py::test_legal_capture" in out
    assert "PASSED test_subject.py::test_fixture" in out
    assert "OFL101 wait-on-uncaptured-event" in out
    assert "event.wait()" in out
    assert "FAILED test_subject.py::test_eager_race_watched" in out
    assert "OFL205 unsynchronized-side-stream-result" in out
    assert "return buffer.sum()  # no wait on the side stream" in out
    assert "PASSED test_subject.py::test_eager_race_not_watched_by_default" in out
