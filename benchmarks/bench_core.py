"""What the semantic core costs, side by side in one run, on a real tree.

    .venv/bin/python -m benchmarks.bench_core [--tree sglang] [--repeat 2]

Alternating so every variant sees the same machine load: `ruff check --select ALL --no-cache`,
`offlint check --no-cache` with the core off (`OFFLINT_SEMANTIC_CORE=0`) and on; then, with the
cache primed, a warm `offlint check` (nothing changed) and a re-check after touching one file of
the core's slice (its lowered form and the tree's answer computed again). Prints the medians and
the ratios; writes JSON (date, machine, versions) under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.trees import get_tree

RESULTS = Path(__file__).resolve().parent / "results"


def _timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=False, timeout=3600)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_core", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default="sglang")
    parser.add_argument("--repeat", type=int, default=2)
    arguments = parser.parse_args(argv)
    tree = get_tree(arguments.tree, quiet=False)
    offlint = [sys.executable, "-m", "offlint", "check", "--exit-zero", "-q"]
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    base = {k: v for k, v in os.environ.items() if k != "OFFLINT_SEMANTIC_CORE"}
    off, on = {**base, "OFFLINT_SEMANTIC_CORE": "0"}, {**base, "OFFLINT_SEMANTIC_CORE": "1"}
    times: dict[str, list[float]] = {"ruff": [], "core off, cold": [], "core on, cold": [], "warm": [], "one file touched": []}
    with tempfile.TemporaryDirectory(prefix="offlint-core-bench-") as scratch:
        cache = Path(scratch) / "cache"
        for _ in range(arguments.repeat):
            times["ruff"].append(_timed([ruff, "check", "--select", "ALL", "--no-cache", "-q", "--exit-zero", str(tree)], base, tree))
            times["core off, cold"].append(_timed([*offlint, "--no-cache", str(tree)], off, tree))
            times["core on, cold"].append(_timed([*offlint, "--no-cache", str(tree)], on, tree))
        shutil.rmtree(cache, ignore_errors=True)
        _timed([*offlint, "--cache-dir", str(cache), str(tree)], on, tree)  # primes the cache
        touched = next(p for p in sorted(tree.rglob("*.py")) if b"wait_stream" in p.read_bytes())
        for _ in range(arguments.repeat):
            times["warm"].append(_timed([*offlint, "--cache-dir", str(cache), str(tree)], on, tree))
            original = touched.read_bytes()
            touched.write_bytes(original + b"\n# touched\n")
            try:
                times["one file touched"].append(_timed([*offlint, "--cache-dir", str(cache), str(tree)], on, tree))
            finally:
                touched.write_bytes(original)
                _timed([*offlint, "--cache-dir", str(cache), str(tree)], on, tree)  # back to warm
    median = {name: statistics.median(values) for name, values in times.items()}
    ratios = {
        "core on / core off (cold)": median["core on, cold"] / median["core off, cold"],
        "core on cold / ruff": median["core on, cold"] / median["ruff"],
        "core off cold / ruff": median["core off, cold"] / median["ruff"],
        "cold / warm (core on)": median["core on, cold"] / median["warm"],
    }
    for name, value in median.items():
        print(f"{name:<20} {value:7.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times[name])})")
    for name, value in ratios.items():
        print(f"{name:<28} {value:6.2f}x")
    stamp = datetime.now(timezone.utc)
    record = {
        "date": stamp.isoformat(),
        "tree": arguments.tree,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        "python": sys.version.split()[0],
        "times": times,
        "medians": median,
        "ratios": ratios,
        "touched": str(touched.relative_to(tree)),
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"bench-core-{arguments.tree}-{stamp.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"written {out.relative_to(RESULTS.parent.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
