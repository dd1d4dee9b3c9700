"""What the capture sanitizer costs an eager forward: the bundled prefetch-offload example's
forward (a side-stream prefetch per offloaded layer: the event and stream calls the sanitizer
watches) timed with CUDA events, median of many, without and with the sanitizer installed, in a
heavy configuration (the probe's default sizes) and a light one (where Python overhead shows).
Rounds alternate eager and sanitized so that drift hits both alike; the ratio is of the medians
of the rounds. Then, once, the light forward with `races=True` (PyTorch's CUDA sanitizer too:
opt-in, not held to the bar) to say what that costs.

    PYTHONPATH=. python benchmarks/sanitizer_overhead.py [--rounds N] [--output FILE.json]

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


def measure(layers: int, hidden: int, batch: int, rounds: int) -> dict[str, Any]:
    probed = build(layers=layers, hidden=hidden)
    x = probed.make_inputs(batch)
    with torch.no_grad():

        def step() -> Any:
            return probed.model(x)

        pairs = []
        for _ in range(rounds):  # alternate, so drift hits both alike
            plain = median_ms(step)
            sanitizer = CaptureSanitizer(mode="record")
            sanitizer.install()
            try:
                watched = median_ms(step)
                calls = dict(sanitizer.counts)
            finally:
                sanitizer.uninstall()
            pairs.append((plain, watched))
    plain = statistics.median(r[0] for r in pairs)
    watched = statistics.median(r[1] for r in pairs)
    return {
        "layers": layers,
        "hidden": hidden,
        "batch": batch,
        "eager_ms": plain,
        "sanitized_ms": watched,
        "ratio": watched / plain,
        "rounds": pairs,
        "watched_calls_in_last_round": calls,
        "violations": len(sanitizer.violations),
    }


def measure_races(layers: int, hidden: int, batch: int) -> dict[str, Any]:
    """The light forward with races=True: CSAN follows every kernel (slow; opt-in)."""
    probed = build(layers=layers, hidden=hidden)
    x = probed.make_inputs(batch)
    with torch.no_grad():

        def step() -> Any:
            return probed.model(x)

        plain = median_ms(step, warmup=3, iters=30)
        sanitizer = CaptureSanitizer(mode="record", races=True)
        sanitizer.install()
        try:
            watched = median_ms(step, warmup=3, iters=30)
        finally:
            sanitizer.uninstall()
        after = median_ms(step, warmup=3, iters=30)  # CSAN off again: back to eager speed
    return {
        "layers": layers,
        "hidden": hidden,
        "batch": batch,
        "eager_ms": plain,
        "sanitized_with_races_ms": watched,
        "ratio": watched / plain,
        "eager_after_ms": after,
        "races_found": [v.what for v in sanitizer.violations],
        "limitations": sanitizer.limitations,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure", file=sys.stderr)
        return 2
    results = {
        name: measure(**config, rounds=args.rounds) for name, config in CONFIGURATIONS.items()
    }
    races = measure_races(**CONFIGURATIONS["light"])
    properties = torch.cuda.get_device_properties(0)
    document = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu_name": properties.name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "bar": 1.2,
        "results": results,
        "races_opt_in": races,
    }
    for name, row in results.items():
        print(
            f"{name}: L={row['layers']} H={row['hidden']} batch {row['batch']}: eager "
            f"{row['eager_ms']:.3f} ms, sanitized {row['sanitized_ms']:.3f} ms, "
            f"ratio {row['ratio']:.3f}x"
        )
    print(
        f"light with races=True: eager {races['eager_ms']:.3f} ms, sanitized with CSAN "
        f"{races['sanitized_with_races_ms']:.3f} ms ({races['ratio']:.1f}x), eager after "
        f"{races['eager_after_ms']:.3f} ms; races found: {len(races['races_found'])}"
    )
    if args.output:
        args.output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
