"""How `offlint check` and `fix` time and memory grow with the input, against issues 27 and 36's bounds.

    .venv/bin/python -m benchmarks.scaling [--methods 200,400,800,1600,3200] [--table-mb 0.1,0.5,1,2,20]
                                           [--copies 1,2,4,8] [--copy-mb 2] [--tree-mb 50]
                                           [--files 12500,25000,50000,100000] [--out FILE]

Every point is one `offlint check --select ALL --min-confidence low --no-cache -j1` (one process:
the time is the analysis, not the pool) in a fresh interpreter, on generated input in a temporary
folder. For each: wall time, CPU time (user + system: the machine may be shared, and CPU time
does not count waiting for a core) and peak RSS (`ru_maxrss` of the run, read by a wrapper
process, and the process tree sampled every 20 ms: the larger). "above base" subtracts a run on
a small stream module (the interpreter, offlint and libcst loaded), so the ratios are the cost of
the input itself. Each series prints its bound and PASS or FAIL:

- literal table: a module with stream code and a literal table of S MB (the issue's 1 MB: 40 s
  and 1.15 GB; 20 MB: an abort at 13 GB), under `check` and under `fix` (a copy, `fix --apply`).
  Bounds: peak above base <= 20x the file's size; a file over the analysis budget is one
  `too-large` line (exit 2); the 1 MB module (issue 36): peak <= 60 MB under check and fix, and
  `fix` writes its fix (it was refused as too large for libcst).
- methods: one class with N stream methods (for each i a producer that forks a side stream,
  copies and records an event; a consumer that waits on it; a forward that synchronizes), with
  the fix budget raised so the fix confirmation (where the quadratic steps were) runs at every
  size. Bound (issue 36): the cpu each added method costs (between consecutive points, each a
  doubling) within 1.2x of the previous step's (linear; fixed costs cancel out). Each point is
  the least cpu of `--repeat` runs (the machine is shared: load inflates a run's cpu).
- tree copies: 1x, 2x, 4x, 8x copies of a slice of a real tree (sglang's first `--copy-mb` MB
  of sources when `python -m benchmarks.trees` cached it, else offlint's fixtures). Bound: cpu
  per copy within 1.2x of the 1x point's (the issue's measure). The slice is of files that
  mention streams (they reach the analysis).
- a `--tree-mb` tree of real offloader code. Bound: peak <= 1 GB.
- many files: trees of N small modules (one in 50 with stream code, the rest plain code the
  prefilter rejects), `check -j2`. Bounds (issue 36): cpu per file at every point within 1.2x of
  the first point's (linear), and the main process's own peak <= 200 MB at 100 000 files.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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


_WRAPPER = """
import os, resource, subprocess, sys
env = dict(os.environ)
env.update(item.split("=", 1) for item in sys.argv[1].split(";") if item)
done = subprocess.run(sys.argv[2:], env=env)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stderr.write(f"\\nSCALING {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss * 1024}\\n")
sys.exit(done.returncode)
"""


# runs offlint's CLI in this very process and reports its own peak (RUSAGE_SELF: not the workers')
_MAIN = """
import atexit, resource, sys
def _report():
    own = resource.getrusage(resource.RUSAGE_SELF)
    sys.stderr.write(f"\\nMAINPEAK {own.ru_maxrss * 1024}\\n")
atexit.register(_report)
from offlint.cli import main
sys.argv = ["offlint", *sys.argv[1:]]
main()
"""


@dataclass
class Point:
    size: float  # in the series' unit
    nbytes: int
    wall: float
    cpu: float
    peak: int
    findings: int
    errors: list[str]
    code: int
    main_peak: int = 0  # the main process's own peak, where measured


def _offlint(args: list[str], path: Path, cwd: Path, env: dict[str, str] | None = None) -> Point:
    """One `offlint ARGS PATH` in a fresh interpreter (run through `_MAIN`, so the main process's
    own peak is known too)."""
    settings = ";".join(f"{k}={v}" for k, v in (env or {}).items())
    command = [sys.executable, "-c", _MAIN, *args, str(path)]
    run = measure([sys.executable, "-c", _WRAPPER, settings, *command], cwd, keep_stdout=True)
    tail = run.stderr.rsplit("SCALING ", 1)
    if len(tail) != 2 or run.returncode not in (0, 1, 2):
        raise SystemExit(f"offlint failed ({run.returncode}) on {path}: {run.stderr[-2000:]}")
    cpu, maxrss = tail[1].split()
    main_peak = int(run.stderr.rsplit("MAINPEAK ", 1)[1].split()[0]) if "MAINPEAK " in run.stderr else 0
    errors = [line for line in (run.stdout + run.stderr).splitlines() if "too-large" in line or "error" in line.lower()]
    nbytes = path.stat().st_size if path.is_file() else 0
    findings = sum(1 for line in run.stdout.splitlines() if ": OFL" in line)
    return Point(0.0, nbytes, run.wall, float(cpu), max(run.peak_rss, int(maxrss)), findings, errors, run.returncode, main_peak)


def _check_own(path: Path, cwd: Path) -> Point:
    """`_check`, run through `_MAIN` (one process with -j1: its own peak is offlint's)."""
    args = ["check", "--select", "ALL", "--min-confidence", "low", "--no-cache", "-j1", "--exit-zero"]
    p = _offlint([*args, "--output-format", "concise"], path, cwd)
    return p


def _fix(path: Path, cwd: Path) -> Point:
    """`fix --apply` on a copy of `path`; the point says whether the copy changed (`findings`: 1)."""
    copy = path.with_name(f"fixed_{path.name}")
    shutil.copyfile(path, copy)
    p = _offlint(["fix", "--apply"], copy, cwd)
    p.findings = int(copy.read_bytes() != path.read_bytes())
    p.nbytes = path.stat().st_size
    copy.unlink()
    return p


def many_files(root: Path, count: int) -> int:
    """`count` small modules under `root` (100 per folder), one in 50 with stream code; their bytes."""
    stream = (REPO / "fixtures" / "group_offload_record_stream.py").read_bytes()
    total = 0
    for index in range(count):
        folder = root / f"p{index // 100}"
        if index % 100 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        data = stream if index % 50 == 0 else (
            f"import os\n\n\ndef f{index}(x, y=1):\n    total = x + y\n    for i in range({index % 7}):\n"
            f"        total += os.getpid() * i\n    return total\n"
        ).encode()
        (folder / f"m{index}.py").write_bytes(data)
        total += len(data)
    return total


def _check(path: Path, cwd: Path, env: dict[str, str] | None = None) -> Point:
    command = [*OFFLINT, "check", "--select", "ALL", "--min-confidence", "low", "--no-cache", "-j1", "--exit-zero"]
    command += ["--output-format", "concise", str(path)]
    settings = ";".join(f"{k}={v}" for k, v in (env or {}).items())
    run = measure([sys.executable, "-c", _WRAPPER, settings, *command], cwd, keep_stdout=True)
    tail = run.stderr.rsplit("SCALING ", 1)
    if len(tail) != 2:
        raise SystemExit(f"offlint failed ({run.returncode}) on {path}: {run.stderr[-2000:]}")
    cpu, maxrss = tail[1].split()
    if run.returncode not in (0, 1, 2):
        raise SystemExit(f"offlint failed ({run.returncode}) on {path}: {run.stderr[-2000:]}")
    findings = sum(1 for line in run.stdout.splitlines() if ": OFL" in line)
    errors = [line for line in (run.stdout + run.stderr).splitlines() if "too-large" in line or "error" in line.lower()]
    nbytes = path.stat().st_size if path.is_file() else sum(f.stat().st_size for f in path.rglob("*.py"))
    return Point(0.0, nbytes, run.wall, float(cpu), max(run.peak_rss, int(maxrss)), findings, errors, run.returncode)


def table_module(megabytes: float) -> str:
    """Stream code (the record_stream fixture) and a literal table, about `megabytes` in all."""
    code = (REPO / "fixtures" / "group_offload_record_stream.py").read_text()
    rows = []
    total = len(code)
    i = 0
    while total < megabytes * 1_000_000:
        row = f"    ({i}, 'layer_{i}', {i * 3.5}, [{i}, {i + 1}, {i + 2}], {{'k': {i}}}),\n"
        rows.append(row)
        total += len(row)
        i += 1
    return code + "\nTABLE = [\n" + "".join(rows) + "]\n"


def tree_slice(megabytes: float) -> list[tuple[str, bytes]]:
    """The first `megabytes` of a real tree's sources (sorted paths), else of offlint's fixtures."""
    # files that reach the analysis (they mention streams), so the copies measure it, not the prefilter
    marks = (b"wait_stream(", b"record_stream(", b".stream(", b"Stream(")
    sources = (
        sorted(p for p in SGLANG.rglob("*.py") if any(mark in p.read_bytes() for mark in marks))
        if SGLANG.is_dir()
        else sorted(REAL_CODE)
    )
    found: list[tuple[str, bytes]] = []
    total = 0
    for path in sources:
        if total >= megabytes * 1_000_000:
            break
        data = path.read_bytes()
        found.append((str(path.relative_to(SGLANG)) if SGLANG.is_dir() else path.name, data))
        total += len(data)
    return found


def _row(unit: float, p: Point, base: Point, previous: tuple[float, Point] | None, first_step: float | None) -> str:
    """One point; `step`: the cpu this point added per unit over the previous point, relative to
    the first such step (1.00 = linear: fixed costs such as start-up cancel out)."""
    above = (p.peak - base.peak) / 1e6
    step = _step(unit, p, previous)
    first_step = first_step or step
    ratio = step / first_step if step is not None and first_step else float("nan")
    return (
        f"  {unit:>8.4g} {p.nbytes:>11} {p.wall:>8.2f} {p.cpu:>8.2f} {p.peak / 1e6:>8.0f} {above:>8.0f}"
        f" {above * 1e6 / p.nbytes:>8.1f} {p.findings:>8} {ratio:>9.2f}"
    )


def _step(unit: float, p: Point, previous: tuple[float, Point] | None) -> float | None:
    if previous is None or unit == previous[0]:
        return None
    return (p.cpu - previous[1].cpu) / (unit - previous[0])


HEADER = (
    f"  {'size':>8} {'bytes':>11} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'+base MB':>8}"
    f" {'mem/size':>8} {'findings':>8} {'step cpu':>9}"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="200,400,800,1600,3200")
    parser.add_argument("--table-mb", default="0.1,0.5,1,2,20")
    parser.add_argument("--copies", default="1,2,4,8")
    parser.add_argument("--copy-mb", type=float, default=2.0)
    parser.add_argument("--tree-mb", type=float, default=50.0)
    parser.add_argument("--files", default="12500,25000,50000,100000")
    parser.add_argument("--repeat", type=int, default=2, help="runs per methods point (the least cpu counts)")
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args()

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    report = [
        f"benchmarks.scaling {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit} (+ working tree),"
        f" Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs (shared)",
        "  each point: `offlint check --select ALL --min-confidence low --no-cache -j1` in a fresh process;"
        " +base: above a run on a small stream module; mem/size: (+base bytes) / file bytes;"
        " step cpu: the cpu a point adds per unit over the previous point, relative to the first step"
        " (1.00 = linear)",
        "  load average at start " + " ".join(f"{v:.1f}" for v in os.getloadavg()),
    ]
    verdicts: list[bool] = []

    def verdict(ok: bool, text: str) -> None:
        verdicts.append(ok)
        report.append(f"  {'PASS' if ok else 'FAIL'}: {text}")

    with tempfile.TemporaryDirectory(prefix="offlint-scaling-") as scratch:
        root = Path(scratch)
        small = root / "small.py"
        small.write_text(table_module(0))
        base = _check(small, root)
        report.append(f"base: {base.nbytes} bytes, {base.wall:.2f} s wall, {base.cpu:.2f} s cpu, peak {base.peak / 1e6:.0f} MB")

        sizes = [float(v) for v in args.table_mb.split(",") if v]
        if sizes:
            report += ["stream code and a literal table (MB): check, then fix --apply (findings: 1 = written)", HEADER]
            ok = True
            one_mb: list[tuple[str, Point]] = []
            for megabytes in sizes:
                path = root / f"table_{megabytes:g}.py"
                path.write_text(table_module(megabytes))
                for what, p in (("check", _check_own(path, root)), ("fix", _fix(path, root))):
                    report.append(_row(p.nbytes / 1e6, p, base, None, None) + f"  {what}, own peak {p.main_peak / 1e6:.0f} MB")
                    if p.errors:
                        report.append(f"      {p.errors[0][:160]}")
                    too_large = p.code == 2 and any("too-large" in e for e in p.errors)
                    ok = ok and (p.peak - base.peak) <= 20 * p.nbytes and (p.code != 2 or too_large)
                    if megabytes == 1:
                        one_mb.append((what, p))
                print(f"table {megabytes:g} MB: {p.wall:.2f} s", file=sys.stderr, flush=True)
            verdict(ok, "peak above base <= 20x the file size at every point; over the budget: one too-large line")
            if one_mb:
                peaks = ", ".join(f"{what} {p.main_peak / 1e6:.0f} MB ({p.main_peak / 60e6:.2f} of the bound)" for what, p in one_mb)
                fixed = any(what == "fix" and p.findings == 1 for what, p in one_mb)
                verdict(
                    all(0 < p.main_peak <= 60_000_000 for _, p in one_mb) and fixed,
                    f"1 MB module with stream code: offlint's own peak <= 60 MB under check and fix: {peaks};"
                    f" fix wrote its fix: {fixed}",
                )

        counts = [int(v) for v in args.methods.split(",") if v]
        if counts:
            report += ["one class, N stream methods (fix budget raised: the fix confirmation runs)", HEADER]
            previous: tuple[float, Point] | None = None
            first_step: float | None = None
            last_step: float | None = None
            ratios: list[float] = []
            for n in counts:
                path = root / f"many_{n}.py"
                path.write_text(many_methods(n))
                # the least cpu of --repeat runs: on a shared machine a run's cpu grows with the load
                runs = [_check(path, root, {"OFFLINT_MAX_FIX_CHARS": "100000000"}) for _ in range(args.repeat)]
                p = min(runs, key=lambda r: r.cpu)
                report.append(_row(n, p, base, previous, first_step))
                step = _step(n, p, previous)
                if step is not None:
                    first_step = first_step or step
                    if last_step:
                        ratios.append(step / last_step)
                    last_step = step
                previous = (n, p)
                print(f"methods {n}: {p.wall:.2f} s", file=sys.stderr, flush=True)
            worst = max(ratios, default=float("nan"))
            verdict(
                bool(ratios) and worst <= 1.2,
                "the cpu each added method costs grows <= 1.2x per doubling: "
                + " / ".join(f"{r:.2f}x" for r in ratios),
            )

        copies = [int(v) for v in args.copies.split(",") if v]
        if copies:
            files = tree_slice(args.copy_mb)
            origin = "sglang-0.5.23" if SGLANG.is_dir() else "offlint fixtures"
            report += [f"tree copies: {len(files)} files of {origin} ({args.copy_mb:g} MB) copied k times", HEADER]
            first: Point | None = None
            previous = None
            first_step = None
            worst = 0.0
            for k in copies:
                tree = root / f"copies_{k}"
                for copy in range(k):
                    for name, data in files:
                        target = tree / f"c{copy}" / name
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(data)
                p = _check(tree, root)
                report.append(_row(k, p, base, previous, first_step))
                step = _step(k, p, previous)
                if step is not None:
                    first_step = first_step or step
                if first is not None:
                    worst = max(worst, (p.cpu / k) / (first.cpu / copies[0]))
                first = first or p
                previous = (k, p)
                shutil.rmtree(tree)
                print(f"copies {k}: {p.wall:.2f} s", file=sys.stderr, flush=True)
            verdict(worst <= 1.2, f"cpu per copy within 1.2x of the 1x point's, as the issue measures it (worst {worst:.2f}x)")

        if args.tree_mb:
            tree = root / "tree"
            real_tree(tree, args.tree_mb)
            report += [f"a {args.tree_mb:g} MB tree of real offloader code", HEADER]
            p = _check(tree, root)
            report.append(_row(p.nbytes / 1e6, p, base, None, None))
            print(f"tree {args.tree_mb:g} MB: {p.wall:.2f} s", file=sys.stderr, flush=True)
            verdict(p.peak <= 1_000_000_000, f"peak {p.peak / 1e6:.0f} MB <= 1 GB on a {p.nbytes / 1e6:.0f} MB tree")
            shutil.rmtree(tree)

        counts = [int(v) for v in args.files.split(",") if v]
        if counts:
            report += [
                "many files: N small modules, 1 in 50 with stream code (`check -j2`; main MB: the main process's own peak)",
                f"  {'files':>8} {'bytes':>11} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'main MB':>8} {'cpu/file':>9} {'vs first':>9}",
            ]
            first_per_file: float | None = None
            worst = 0.0
            largest: Point | None = None
            for n in counts:
                tree = root / f"files_{n}"
                nbytes = many_files(tree, n)
                p = _offlint(
                    ["check", "--select", "ALL", "--no-cache", "-j2", "--exit-zero", "--output-format", "concise"], tree, root
                )
                per_file = p.cpu / n
                first_per_file = first_per_file or per_file
                worst = max(worst, per_file / first_per_file)
                report.append(
                    f"  {n:>8} {nbytes:>11} {p.wall:>8.2f} {p.cpu:>8.2f} {p.peak / 1e6:>8.0f} {p.main_peak / 1e6:>8.0f}"
                    f" {per_file * 1e3:>7.3f}ms {per_file / first_per_file:>9.2f}"
                )
                largest = p
                shutil.rmtree(tree)
                print(f"files {n}: {p.wall:.2f} s", file=sys.stderr, flush=True)
            verdict(worst <= 1.2, f"cpu per file within 1.2x of the first point's at every point (worst {worst:.2f}x)")
            assert largest is not None
            verdict(
                0 < largest.main_peak <= 200_000_000,
                f"main process peak {largest.main_peak / 1e6:.0f} MB <= 200 MB at {counts[-1]} files"
                f" ({largest.main_peak / 200e6:.2f} of the bound)",
            )

    report.append(
        f"{sum(verdicts)} of {len(verdicts)} bounds hold; load average at end "
        + " ".join(f"{v:.1f}" for v in os.getloadavg())
    )
    text = "\n".join(report) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    sys.exit(code)
