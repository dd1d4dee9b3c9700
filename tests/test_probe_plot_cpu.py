"""`offlint probe --plot FILE --from-trace DIR` (issue 16): one graph replay per strategy drawn
from the profiler traces `--trace DIR` keeps, on a machine without a GPU. The traces here are
synthetic, in the shape torch.profiler exports (kernels and HtoD memcpys on streams, each graph
replay's device work tagged with its cudaGraphLaunch's correlation id)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from offlint.probing.command import probe_command
from offlint.probing.plot import replay_timeline

COMPUTE, SIDE = 7, 20


def _trace(copies_on_side_stream: bool, replays: int = 3) -> dict[str, Any]:
    """`replays` replays of 4 kernels of 100 us, each with a 60 us H2D copy: on a side stream
    under the next kernel (overlap), or on the compute stream before it (inline)."""
    events: list[dict[str, Any]] = []
    for replay in range(replays):
        correlation = 100 + replay
        base = 10_000.0 * replay
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaGraphLaunch",
                "ts": base,
                "dur": 5.0,
                "args": {"correlation": correlation},
            }
        )
        t = base + 20.0
        for layer in range(4):
            if copies_on_side_stream:
                copy_start, kernel_start = t, t
            else:
                copy_start, kernel_start = t, t + 60.0
            events.append(
                {
                    "ph": "X",
                    "cat": "gpu_memcpy",
                    "name": "Memcpy HtoD (Pinned -> Device)",
                    "ts": copy_start,
                    "dur": 60.0,
                    "args": {
                        "stream": SIDE if copies_on_side_stream else COMPUTE,
                        "correlation": correlation,
                    },
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"gemm_{layer}",
                    "ts": kernel_start,
                    "dur": 100.0,
                    "args": {"stream": COMPUTE, "correlation": correlation},
                }
            )
            t = kernel_start + 100.0
    # a stray eager memcpy outside any replay must not be counted
    events.append(
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD (Pinned -> Device)",
            "ts": 99_000.0,
            "dur": 60.0,
            "args": {"stream": COMPUTE, "correlation": 5},
        }
    )
    return {"traceEvents": events}


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "overlap-replay-64.json").write_text(json.dumps(_trace(True)))
    (folder / "overlap-replay-32.json").write_text(json.dumps(_trace(True)))  # smaller: unused
    (folder / "inline-replay-64.json").write_text(json.dumps(_trace(False)))
    (folder / "inline-eager-64.json").write_text(json.dumps(_trace(False)))  # not a replay
    return folder


def test_one_replay_is_taken_and_overlap_measured() -> None:
    overlap = replay_timeline(_trace(True), "overlap", 64)
    assert overlap.replays_in_trace == 3
    assert len(overlap.spans) == 8  # the middle replay's 4 kernels and 4 copies, no stray
    stats = overlap.stats()
    assert stats["h2d_copies"] == 4
    assert stats["h2d_ms"] == pytest.approx(0.24)
    assert stats["h2d_overlap_share"] == pytest.approx(1.0)
    assert stats["replay_ms"] == pytest.approx(0.4)
    assert overlap.streams == [COMPUTE, SIDE]
    inline = replay_timeline(_trace(False), "inline", 64).stats()
    assert inline["h2d_overlap_share"] == 0.0
    assert inline["replay_ms"] == pytest.approx(0.64)


def test_plot_from_trace_writes_a_png_without_a_gpu(trace_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    output = tmp_path / "timeline.png"
    result = CliRunner().invoke(
        probe_command, ["--plot", str(output), "--from-trace", str(trace_dir)]
    )
    assert result.exit_code == 0, result.output
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert output.stat().st_size > 10_000
    assert "overlap: replay 0.40 ms, H2D 0.24 ms (4 copies), 100% overlapping compute" in (
        result.output
    )
    assert "inline: replay 0.64 ms, H2D 0.24 ms (4 copies), 0% overlapping compute" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from-trace", "."], "--from-trace goes with --plot FILE"),
        (["--plot", "x.png", "--from-trace", "missing"], "is not a folder"),
        (["--plot", "x.png", "--from-trace", "."], "no graph replay traces"),
    ],
)
def test_plot_usage_errors_are_one_line(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(probe_command, args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_without_matplotlib_plot_names_the_extra(
    trace_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    result = CliRunner().invoke(
        probe_command, ["--plot", str(tmp_path / "x.png"), "--from-trace", str(trace_dir)]
    )
    assert result.exit_code == 2
    assert "pip install 'offlint[plot]'" in result.output


def test_a_marked_call_of_several_graphs_is_taken_whole() -> None:
    """torch.compile's CUDA graph trees run a step as several graphs: the profiler range
    timing.py puts around each call keeps them together."""
    events: list[dict[str, Any]] = []
    for call in range(3):
        base = 10_000.0 * call
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": "offlint-step", "ts": base, "dur": 500.0}
        )
        for part in range(2):
            correlation = 10 * call + part
            at = base + 100.0 * part
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaGraphLaunch",
                    "ts": at,
                    "dur": 5.0,
                    "args": {"correlation": correlation},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "ts": at + 50.0,
                    "dur": 40.0,
                    "args": {"stream": COMPUTE, "correlation": correlation},
                }
            )
        events.append(
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": "Memcpy HtoD (Pinned -> Device)",
                "ts": base + 60.0,
                "dur": 30.0,
                "args": {"stream": SIDE, "correlation": 10 * call + 1},
            }
        )
    timeline = replay_timeline({"traceEvents": events}, "compiled", 8)
    assert len(timeline.spans) == 3  # both graphs of the middle call and its copy
    assert timeline.stats()["h2d_copies"] == 1
    assert timeline.length_ms == pytest.approx(0.14)
