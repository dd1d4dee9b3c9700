"""What the capture sanitizer costs an eager forward: the bundled prefetch-offload example's
forward (a side-stream prefetch per offloaded layer: the event and stream calls the sanitizer
watches) timed with CUDA events, median of many, without and with the sanitizer installed, in a
heavy configuration (the probe's default sizes) and a light one (where Python overhead shows).

    PYTHONPATH=. python benchmarks/sanitizer_overhead.py [--output FILE.json]

Needs a CUDA GPU. Prints one line per configuration and the ratio (issue 17's bar: <= 1.2x).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from offlint.probing.examples.prefetch_offload import build
from offlint.probing.sanitizer import CaptureSanitizer

CONFIGURATIONS = {
    "heavy": {"layers": 16, "hidden": 4096, "batch": 4096},
    "light": {"layers": 16, "hidden": 1024, "batch": 64},
}


def median_ms(fn: Any, warmup: int = 10, iters: int = 200) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure(layers: int, hidden: int, batch: int) -> dict[str, Any]:
    probed = build(layers=layers, hidden=hidden)
    x = probed.make_inputs(batch)
    with torch.no_grad():

        def step() -> Any:
            return probed.model(x)

        rounds = []
        for _ in range(3):  # alternate, so drift hits both alike
            plain = median_ms(step)
            sanitizer = CaptureSanitizer(mode="record")
            sanitizer.install()
            try:
                watched = median_ms(step)
                calls = dict(sanitizer.counts)
            finally:
                sanitizer.uninstall()
            rounds.append((plain, watched))
    plain = statistics.median(r[0] for r in rounds)
    watched = statistics.median(r[1] for r in rounds)
    return {
        "layers": layers,
        "hidden": hidden,
        "batch": batch,
        "eager_ms": plain,
        "sanitized_ms": watched,
        "ratio": watched / plain,
        "rounds": rounds,
        "watched_calls_in_last_round": calls,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure", file=sys.stderr)
        return 2
    results = {name: measure(**config) for name, config in CONFIGURATIONS.items()}
    properties = torch.cuda.get_device_properties(0)
    document = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu_name": properties.name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "bar": 1.2,
        "results": results,
    }
    for name, row in results.items():
        print(
            f"{name}: L={row['layers']} H={row['hidden']} batch {row['batch']}: eager "
            f"{row['eager_ms']:.3f} ms, sanitized {row['sanitized_ms']:.3f} ms, "
            f"ratio {row['ratio']:.3f}x"
        )
    if args.output:
        args.output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
