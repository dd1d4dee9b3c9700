"""How `offlint check` time and memory grow with the input: is it linear?

    .venv/bin/python -m benchmarks.scaling [--methods 100,200,400,800] [--sizes-mb 1,2,4,8]
                                           [--file-sizes-kb 64,128,256,512] [--fix] [--out FILE]

Three series, each `offlint check --select ALL --no-cache -j1` (one process: the time is the
analysis, not the pool) on generated input in a temporary folder:

- methods: one class with N stream methods (for each i a producer that forks a side stream,
  copies and records an event; a consumer that waits on it and returns the tensors; a forward
  that synchronizes), the shape that made `[*]` confirmation quadratic (issue 15, item 3);
- tree size: real offloader code (offlint's fixtures and, when downloaded, sglang's offloaders)
  copied into a tree of about S MB;
- file size: the same code concatenated into one file of about K kB.

For each point: wall time, CPU time (user + system, workers included: the machine may be shared,
and CPU time does not count waiting for a core), peak RSS of the process tree, and the ratios to
the first point: CPU ratio / size ratio is 1.0 for linear growth and 2.0 at the issue's "linear
within 2x" bar.
`--fix` also times `offlint fix` (diff only) on the methods series. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.bench_check import OFFLINT, measure

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
REAL_CODE = [
    REPO / "fixtures" / "sglang_offloader_original.py",
    REPO / "fixtures" / "sglang_offloader_inline.py",
    REPO / "fixtures" / "block_hook_offloader.py",
    REPO / "fixtures" / "vllm_static_slots.py",
    REPO / "fixtures" / "group_offload_record_stream.py",
]
SGLANG = Path.home() / ".cache" / "offlint-trees" / "sglang-0.5.23" / "src" / "sglang"
SGLANG_OFFLOADERS = ("srt/utils/offloader.py", "multimodal_gen/runtime/managers/memory_managers/layerwise_offload.py")


def many_methods(n: int) -> str:
    lines = [
        "import torch",
        "",
        "",
        "class Many(torch.nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        "        self.side = torch.cuda.Stream()",
    ]
    lines += [f"        self.ev{i} = torch.cuda.Event()" for i in range(n)]
    lines.append("")
    for i in range(n):
        lines += [
            f"    def prefetch_{i}(self, cpu):",
            "        with torch.cuda.stream(self.side):",
            f"            self.buf{i} = cpu.to('cuda', non_blocking=True)",
            f"            self.ev{i}.record()",
            "",
            f"    def take_{i}(self):",
            f"        self.ev{i}.wait()",
            f"        return self.buf{i}",
            "",
            f"    def forward_{i}(self, x):",
            "        self.side.synchronize()",
            "        return x.item()",
            "",
        ]
    return "\n".join(lines) + "\n"


def real_sources() -> list[bytes]:
    found = [path.read_bytes() for path in REAL_CODE if path.is_file()]
    found += [(SGLANG / name).read_bytes() for name in SGLANG_OFFLOADERS if (SGLANG / name).is_file()]
    return found


def real_tree(root: Path, megabytes: float) -> int:
    """Copies of real offloader code until the tree holds about `megabytes`; its size."""
    sources = real_sources()
    target = int(megabytes * 1_000_000)
    total = 0
    index = 0
    while total < target:
        data = sources[index % len(sources)]
        folder = root / f"pkg{index // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{index}.py").write_bytes(data)
        total += len(data)
        index += 1
    return total


def real_file(path: Path, kilobytes: float) -> int:
    """Real offloader code concatenated (imports and all) into one file of about `kilobytes`."""
    sources = sorted(real_sources(), key=len)[:-2] or real_sources()  # the small ones: fine steps
    parts: list[bytes] = []
    total = 0
    index = 0
    while total < kilobytes * 1000:
        data = sources[index % len(sources)].replace(b"class ", f"class V{index}_".encode())
        parts.append(data if data.endswith(b"\n") else data + b"\n")
        total += len(parts[-1])
        index += 1
    path.write_bytes(b"".join(parts))
    return total


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _check(path: Path, cwd: Path) -> tuple[float, float, int, int]:
    command = [*OFFLINT, "check", "--select", "ALL", "--min-confidence", "low", "--no-cache", "-j1", "--exit-zero"]
    command += ["--output-format", "concise", str(path)]
    cpu = _cpu_of_children()
    run = measure(command, cwd, keep_stdout=True)
    cpu = _cpu_of_children() - cpu
    if run.returncode not in (0, 1, 2):
        raise SystemExit(f"offlint failed ({run.returncode}) on {path}: {run.stderr[-2000:]}")
    findings = sum(1 for line in run.stdout.splitlines() if ": OFL" in line)
    return run.wall, cpu, run.peak_rss, findings


def _fix(path: Path, cwd: Path) -> float:
    run = measure([*OFFLINT, "fix", "--select", "ALL", str(path)], cwd, keep_stdout=False)
    return run.wall


Row = tuple[float, int, float, float, int, int, "float | None"]  # size, bytes, wall, cpu, peak, findings, fix


def _table(title: str, unit: str, rows: list[Row]) -> list[str]:
    header = (
        f"  {unit:>8} {'bytes':>11} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'findings':>8}"
        f" {'size x':>7} {'wall x':>7} {'cpu x':>7} {'cpu/size':>9}"
    )
    out = [title, header]
    first_size, first_wall, first_cpu = rows[0][0], rows[0][2], rows[0][3]
    for size, nbytes, wall, cpu, peak, findings, fix_wall in rows:
        size_ratio = size / first_size
        cpu_ratio = cpu / first_cpu if first_cpu else float("nan")
        extra = f"   fix {fix_wall:.2f} s" if fix_wall is not None else ""
        out.append(
            f"  {size:>8.4g} {nbytes:>11} {wall:>8.2f} {cpu:>8.2f} {peak / 1e6:>8.0f} {findings:>8}"
            f" {size_ratio:>7.2f} {wall / first_wall:>7.2f} {cpu_ratio:>7.2f} {cpu_ratio / size_ratio:>9.2f}{extra}"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="100,200,400,800")
    parser.add_argument("--sizes-mb", default="1,2,4,8")
    parser.add_argument("--file-sizes-kb", default="64,128,256,512")
    parser.add_argument("--fix", action="store_true", help="also time `offlint fix` on the methods series")
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args()

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    report = [
        f"benchmarks.scaling {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit} (+ working tree),"
        f" Python {platform.python_version()}, {platform.machine()}, {len(real_sources())} real sources",
        "  `offlint check --select ALL --min-confidence low --no-cache -j1`; cpu/size: 1.0 = linear,"
        " 2.0 = the issue's bar; load average at start "
        + " ".join(f"{v:.1f}" for v in os.getloadavg()),
    ]
    with tempfile.TemporaryDirectory(prefix="offlint-scaling-") as scratch:
        root = Path(scratch)
        rows: list[Row] = []
        for n in [int(v) for v in args.methods.split(",") if v]:
            path = root / f"many_{n}.py"
            path.write_text(many_methods(n))
            wall, cpu, peak, findings = _check(path, root)
            rows.append((n, path.stat().st_size, wall, cpu, peak, findings, _fix(path, root) if args.fix else None))
            print(f"methods {n}: {wall:.2f} s", file=sys.stderr, flush=True)
        if rows:
            report += _table("one class, N stream methods", "methods", rows)
        rows = []
        for megabytes in [float(v) for v in args.sizes_mb.split(",") if v]:
            tree = root / f"tree_{megabytes:g}"
            size = real_tree(tree, megabytes)
            wall, cpu, peak, findings = _check(tree, root)
            rows.append((size / 1e6, size, wall, cpu, peak, findings, None))
            print(f"tree {megabytes:g} MB: {wall:.2f} s", file=sys.stderr, flush=True)
        if rows:
            report += _table("a tree of real offloader code", "MB", rows)
        rows = []
        for kilobytes in [float(v) for v in args.file_sizes_kb.split(",") if v]:
            path = root / f"one_{kilobytes:g}.py"
            size = real_file(path, kilobytes)
            wall, cpu, peak, findings = _check(path, root)
            rows.append((size / 1000, size, wall, cpu, peak, findings, None))
            print(f"file {kilobytes:g} kB: {wall:.2f} s", file=sys.stderr, flush=True)
        if rows:
            report += _table("one file of real offloader code", "kB", rows)
    text = "\n".join(report) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    sys.exit(code)
