"""`offlint probe --plot FILE`: one graph replay per strategy on a timeline, from the profiler
traces `--trace DIR` keeps (Chrome/Perfetto JSON), so a plot can be made on a machine without
a GPU (`offlint probe --plot out.png --from-trace DIR`) from traces written on one that has.

Each strategy (scenario) gets a panel; each CUDA stream a lane (in a replay CUDA runs a graph's
parallel branches on streams of its own, so the lanes are those, not the capture's streams); compute kernels and H2D copies
are drawn in two colours, so copies that overlap compute (the overlap fix's side stream) and
copies serial with it (the inline fix's copies on the capture stream) are told apart at a
glance. The numbers under each panel: the replay's length, the H2D time, and the share of the
H2D time that ran while a kernel ran.

Reading a trace needs only the standard library (`replay_timeline`); drawing needs matplotlib,
the optional extra `offlint[plot]`.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offlint.probing.errors import ProbeUsageError
from offlint.probing.timing import STEP_MARK

# `<scenario>-replay-<batch>.json`, as scenario.py names the traces it keeps.
_REPLAY_TRACE = re.compile(r"^(?P<scenario>.+)-replay-(?P<batch>\d+)\.json$")


@dataclass(frozen=True)
class Span:
    start_ms: float  # from the replay's first device event
    end_ms: float
    stream: int
    kind: str  # "compute" or "h2d"
    name: str


@dataclass
class Timeline:
    scenario: str
    batch: int
    spans: list[Span] = field(default_factory=list)
    replays_in_trace: int = 0

    @property
    def length_ms(self) -> float:
        return max((s.end_ms for s in self.spans), default=0.0)

    @property
    def streams(self) -> list[int]:
        """Streams in lane order: the one with the most compute first."""
        compute: dict[int, float] = {}
        for span in self.spans:
            extra = span.end_ms - span.start_ms if span.kind == "compute" else 0.0
            compute[span.stream] = compute.get(span.stream, 0.0) + extra
        return sorted(compute, key=lambda s: (-compute[s], s))

    def stats(self) -> dict[str, float]:
        h2d = _union([(s.start_ms, s.end_ms) for s in self.spans if s.kind == "h2d"])
        compute = _union([(s.start_ms, s.end_ms) for s in self.spans if s.kind == "compute"])
        h2d_ms = sum(end - start for start, end in h2d)
        overlapped = _intersection_length(h2d, compute)
        return {
            "replay_ms": self.length_ms,
            "h2d_ms": h2d_ms,
            "compute_ms": sum(end - start for start, end in compute),
            "h2d_overlapped_ms": overlapped,
            "h2d_overlap_share": overlapped / h2d_ms if h2d_ms else 0.0,
            "h2d_copies": float(sum(1 for s in self.spans if s.kind == "h2d")),
        }


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _intersection_length(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if end > start:
            total += end - start
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _kind(event: dict[str, Any]) -> str | None:
    category = event.get("cat")
    if category == "kernel":
        return "compute"
    if category == "gpu_memcpy" and "HtoD" in str(event.get("name", "")):
        return "h2d"
    return None


def _correlation(event: dict[str, Any]) -> Any:
    return (event.get("args") or {}).get("correlation")


def _middle_call(events: list[dict[str, Any]], device: list[dict[str, Any]]) -> list[Any]:
    """The device events of the middle profiled call (the first may carry start-up effects).

    timing.py marks each call with a profiler range (`STEP_MARK`): a call's device work is
    what the runtime calls inside that range launched (matched by correlation id), a whole
    step even when it is several graphs and eager kernels (torch.compile's CUDA graph trees).
    Traces without the marks are cut at each `cudaGraphLaunch`; a trace with neither is taken
    whole."""
    steps = sorted(
        (e for e in events if e.get("name") == STEP_MARK and e.get("cat") == "user_annotation"),
        key=lambda e: float(e.get("ts", 0.0)),
    )
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    if steps:
        step = steps[len(steps) // 2]
        start = float(step["ts"])
        end = start + float(step.get("dur", 0.0))
        wanted = {_correlation(e) for e in runtime if start <= float(e.get("ts", 0.0)) <= end}
        chosen = [e for e in device if _correlation(e) in wanted - {None}]
        if chosen:
            return chosen
    launches = sorted(
        (e for e in runtime if e.get("name") == "cudaGraphLaunch"),
        key=lambda e: float(e.get("ts", 0.0)),
    )
    if launches:
        middle = _correlation(launches[len(launches) // 2])
        chosen = [e for e in device if _correlation(e) == middle]
        if chosen:
            return chosen
    return device


def replay_timeline(trace: dict[str, Any], scenario: str, batch: int) -> Timeline:
    """The device events of one profiled call (a graph replay) of a trace of several, times in
    ms from its first event (`_middle_call` says which events)."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict)]
    device = [e for e in events if _kind(e) is not None and e.get("ph", "X") == "X"]
    launches = [e for e in events if e.get("name") == "cudaGraphLaunch"]
    timeline = Timeline(scenario, batch, replays_in_trace=len(launches))
    chosen = _middle_call(events, device)
    if not chosen:
        return timeline
    origin = min(float(e["ts"]) for e in chosen)
    for event in sorted(chosen, key=lambda e: float(e["ts"])):
        start = (float(event["ts"]) - origin) / 1e3
        args = event.get("args") or {}
        stream = args.get("stream", event.get("tid", 0))
        timeline.spans.append(
            Span(
                start,
                start + float(event.get("dur", 0.0)) / 1e3,
                int(stream) if str(stream).lstrip("-").isdigit() else 0,
                str(_kind(event)),
                str(event.get("name", "")),
            )
        )
    return timeline


def find_replay_traces(directory: Path) -> list[tuple[str, int, Path]]:
    """(scenario, batch, file) of every replay trace in `directory`, one per scenario: its
    largest batch size (the heavy configuration the probe times first)."""
    if not directory.is_dir():
        raise ProbeUsageError(f"--from-trace: {directory} is not a folder")
    best: dict[str, tuple[int, Path]] = {}
    for path in sorted(directory.iterdir()):
        found = _REPLAY_TRACE.match(path.name)
        if found is None:
            continue
        scenario, batch = found["scenario"], int(found["batch"])
        if scenario not in best or batch > best[scenario][0]:
            best[scenario] = (batch, path)
    if not best:
        raise ProbeUsageError(
            f"--from-trace: no graph replay traces (NAME-replay-BATCH.json) in {directory}; "
            "write them with `offlint probe --trace DIR`"
        )
    return [(scenario, batch, path) for scenario, (batch, path) in best.items()]


def load_timelines(directory: Path) -> list[Timeline]:
    timelines = []
    for scenario, batch, path in find_replay_traces(directory):
        try:
            trace = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ProbeUsageError(f"--from-trace: cannot read {path}: {exc}") from None
        timelines.append(replay_timeline(trace, scenario, batch))
    return timelines


def check_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise ProbeUsageError(
            "--plot needs matplotlib: pip install 'offlint[plot]' (or write the traces with "
            "--trace DIR on the GPU machine and plot them elsewhere with --plot FILE "
            "--from-trace DIR)"
        )


_COLOURS = {"compute": "#4C72B0", "h2d": "#DD8452"}


def plot_timelines(timelines: list[Timeline], output: Path) -> dict[str, dict[str, float]]:
    """Draw the timelines into a PNG at `output`; return each one's stats."""
    check_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = max(1, len(timelines))
    figure, axes = plt.subplots(rows, 1, figsize=(12, 1.2 + 1.6 * rows), squeeze=False)
    stats: dict[str, dict[str, float]] = {}
    longest = max((t.length_ms for t in timelines), default=1.0) or 1.0
    for axis, timeline in zip(axes[:, 0], timelines, strict=False):
        numbers = timeline.stats()
        stats[timeline.scenario] = numbers
        lanes = timeline.streams
        for lane, stream in enumerate(lanes):
            for kind in ("compute", "h2d"):
                bars = [
                    (s.start_ms, s.end_ms - s.start_ms)
                    for s in timeline.spans
                    if s.stream == stream and s.kind == kind
                ]
                if bars:
                    axis.broken_barh(
                        bars,
                        (lane - 0.4, 0.8),
                        facecolors=_COLOURS[kind],
                        edgecolors="white",
                        linewidth=0.3,
                    )
        axis.set_yticks(range(len(lanes)), [f"stream {s}" for s in lanes])
        axis.set_ylim(-0.6, max(len(lanes), 1) - 0.4)
        axis.invert_yaxis()
        axis.set_xlim(0, longest * 1.02)
        axis.set_title(
            f"{timeline.scenario} (batch {timeline.batch}): replay {numbers['replay_ms']:.2f} ms, "
            f"H2D {numbers['h2d_ms']:.2f} ms in {numbers['h2d_copies']:g} copies, "
            f"{100 * numbers['h2d_overlap_share']:.0f}% of it overlapping compute",
            fontsize=9,
            loc="left",
        )
        axis.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("ms from the start of one graph replay")
    figure.legend(
        handles=[
            Patch(color=_COLOURS["compute"], label="compute (kernels)"),
            Patch(color=_COLOURS["h2d"], label="H2D copy"),
        ],
        loc="upper right",
        ncols=2,
    )
    figure.tight_layout(rect=(0, 0, 1, 0.95))
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=110)
    plt.close(figure)
    return stats
