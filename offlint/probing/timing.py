"""GPU timing and H2D copy counting, run inside a scenario's worker process.

Times come from CUDA events around each call, after a warm-up, as the median of many (the
spread is kept too): device work is asynchronous, so host clocks would time the launches. Copies
are counted from a torch.profiler trace of a few calls, which sees the copies a graph replay
performs as well as eager ones: a double copy shows up as one copy too many per call.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

# The name of the profiler range around each profiled call.
STEP_MARK = "offlint-step"


def median_ms(fn: Callable[[], object], warmup: int, iters: int) -> dict[str, float]:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(end) for start, end in zip(starts, ends, strict=True))
    return {
        "median_ms": statistics.median(times),
        "p10_ms": times[round(0.1 * (len(times) - 1))],
        "p90_ms": times[round(0.9 * (len(times) - 1))],
        "iters": float(iters),
    }


def h2d_bandwidth(nbytes: int, device: Any, warmup: int, iters: int) -> dict[str, float]:
    """Pinned host → device copy of `nbytes` (one offloaded layer's weights), as an offloader
    issues it (`non_blocking=True` from pinned memory)."""
    import torch

    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    host.fill_(1)
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    timed = median_ms(lambda: target.copy_(host, non_blocking=True), warmup, iters)
    return {
        "bytes": float(nbytes),
        "copy_ms": timed["median_ms"],
        "gb_per_s": nbytes / (timed["median_ms"] * 1e-3) / 1e9,
    }


def count_h2d_copies(
    fn: Callable[[], object], repeats: int, keep_trace: str | None = None
) -> dict[str, Any]:
    """H2D copies (and bytes) per call of `fn`, from a profiler trace of `repeats` calls; with
    `keep_trace`, the trace (Chrome/Perfetto JSON) is written there and kept."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            # Each call marked, so a kept trace can be cut into calls (plot.py).
            with record_function(STEP_MARK):
                fn()
        torch.cuda.synchronize()
    if keep_trace is not None:
        os.makedirs(os.path.dirname(keep_trace) or ".", exist_ok=True)
        path = keep_trace
    else:
        handle, path = tempfile.mkstemp(suffix=".json", prefix="offlint-probe-trace-")
        os.close(handle)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as stream:
            trace = json.load(stream)
    finally:
        if keep_trace is None:
            os.unlink(path)
    summary = summarize_h2d_trace(trace, repeats)
    if keep_trace is not None:
        summary["trace"] = keep_trace
    return summary


def summarize_h2d_trace(trace: dict[str, Any], repeats: int) -> dict[str, Any]:
    """Count the device-side H2D memcpy events of a Chrome trace exported by torch.profiler."""
    copies = 0
    total_bytes = 0
    kinds: dict[str, int] = {}
    for event in trace.get("traceEvents", []):
        name = str(event.get("name", ""))
        if event.get("cat") != "gpu_memcpy" or "HtoD" not in name:
            continue
        copies += 1
        total_bytes += int((event.get("args") or {}).get("bytes", 0))
        kinds[name] = kinds.get(name, 0) + 1
    return {
        "copies": copies / repeats,
        "bytes": total_bytes / repeats,
        "kinds": {name: count / repeats for name, count in sorted(kinds.items())},
        "calls": repeats,
    }
