"""`offlint check` against `ruff check --select ALL` on real trees, side by side.

    .venv/bin/python -m benchmarks.bench_check [--trees accelerate,deepspeed,sglang] [--repeat 3]

Per tree, alternating so both see the same machine load: ruff (`--select ALL -q --no-cache`),
offlint cold (`--select ALL --no-cache`), offlint warm (cache primed once, then measured). Then
how offlint's cold time grows with tree size (1x, 2x, 4x hard-linked copies of a tree) and with
the share of files that pass the prefilter. Peak memory is the largest sum of RSS over the whole
process tree (workers included), sampled from /proc every 20 ms. Results go to
benchmarks/results/ as JSON and text, with the date, machine and versions.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.trees import DEFAULT_TREES, TreeUnavailable, get_tree, tree_stats

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
VENV_BIN = Path(sys.executable).parent
REPO = HERE.parent
# offlint runs as `python -m offlint` from a snapshot of the source taken at the start, so that
# edits made to the checkout while the benchmark runs neither mix versions nor (through the
# cache's engine key) turn warm runs cold
OFFLINT = [sys.executable, "-m", "offlint"]
ENV: dict[str, str] = dict(os.environ)
RUFF = shutil.which("ruff", path=str(VENV_BIN)) or shutil.which("ruff") or "ruff"
PAGE = os.sysconf("SC_PAGE_SIZE")


# --------------------------------------------------------------------------- measuring


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(c) for c in handle.read().split())
    except OSError:
        pass
    return found


def _tree_rss(pid: int) -> int:
    total = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/statm") as handle:
                total += int(handle.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
        stack.extend(_children(current))
    return total


@dataclass
class Run:
    wall: float
    peak_rss: int
    returncode: int
    stdout: str
    stderr: str


def measure(command: list[str], cwd: Path, *, keep_stdout: bool = True) -> Run:
    """Wall time and the peak RSS summed over the process tree. `keep_stdout=False` sends stdout
    to /dev/null: ruff's `--select ALL` prints hundreds of thousands of lines on a big tree, and
    reading them through a pipe would bill ruff for our reading (its best case is measured)."""
    peak = 0
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE if keep_stdout else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(process.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    return Run(wall, peak, process.returncode, out or "", err)


def offlint_cmd(path: Path, *, cold: bool) -> list[str]:
    command = [*OFFLINT, "check", "--select", "ALL", "--output-format", "offlint-json", "--timings", "--exit-zero"]
    if cold:
        command.append("--no-cache")
    return [*command, str(path)]


def ruff_cmd(path: Path) -> list[str]:
    return [RUFF, "check", "--select", "ALL", "-q", "--no-cache", "--exit-zero", str(path)]


_TIMINGS_HEAD = re.compile(
    r"timings: (\d+) files: (\d+) from cache \((\d+) not even read\), (\d+) settled by the prefilter, (\d+) parsed"
)


def parsed_count(stderr: str) -> dict[str, int]:
    match = _TIMINGS_HEAD.search(stderr)
    if not match:
        return {}
    files, cached, unread, settled, parsed = (int(g) for g in match.groups())
    return {"files": files, "cached": cached, "unread": unread, "prefiltered": settled, "parsed": parsed}


def _check_offlint(run: Run, label: str) -> None:
    if run.returncode not in (0, 1):
        raise SystemExit(f"{label}: offlint exited {run.returncode}: {run.stderr[-2000:]}")
    json.loads(run.stdout or "[]")


@dataclass
class TreeResult:
    tree: str
    path: str
    files: int
    megabytes: float
    parsed: int = 0
    prefiltered: int = 0
    ruff: list[float] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)
    warm: list[float] = field(default_factory=list)
    # `offlint --version`: interpreter start-up, click and the CLI, the floor of any run
    startup: list[float] = field(default_factory=list)
    ruff_peak_mb: float = 0.0
    cold_peak_mb: float = 0.0
    warm_peak_mb: float = 0.0
    internal_errors: int = 0
    warm_cached: list[int] = field(default_factory=list)  # files served from the cache per warm run
    warm_unread: list[int] = field(default_factory=list)  # ... of which the stat index spared reading

    @property
    def summary(self) -> dict[str, float]:
        ruff, cold, warm, startup = (
            statistics.median(v) if v else float("nan") for v in (self.ruff, self.cold, self.warm, self.startup)
        )
        return {
            "ruff_median_s": ruff,
            "cold_median_s": cold,
            "warm_median_s": warm,
            "startup_median_s": startup,
            "cold_over_ruff": cold / ruff,
            "cold_over_warm": cold / warm,
        }


def bench_tree(name: str, path: Path, repeat: int, workdir: Path) -> TreeResult:
    files, size = tree_stats(path)
    result = TreeResult(name, str(path), files, size / 1e6)
    cwd = workdir / f"cwd-{name}"
    cwd.mkdir(exist_ok=True)
    # prime the warm cache (and the page cache for everyone)
    prime = measure(offlint_cmd(path, cold=False), cwd)
    _check_offlint(prime, f"{name} prime")
    for _ in range(repeat):
        ruff = measure(ruff_cmd(path), cwd, keep_stdout=False)
        result.ruff.append(ruff.wall)
        result.ruff_peak_mb = max(result.ruff_peak_mb, ruff.peak_rss / 1e6)
        cold = measure(offlint_cmd(path, cold=True), cwd)
        _check_offlint(cold, f"{name} cold")
        result.cold.append(cold.wall)
        result.cold_peak_mb = max(result.cold_peak_mb, cold.peak_rss / 1e6)
        counts = parsed_count(cold.stderr)
        result.parsed = counts.get("parsed", 0)
        result.prefiltered = counts.get("prefiltered", 0)
        result.internal_errors = cold.stdout.count('"internal-error"') + cold.stderr.count("internal-error")
        warm = measure(offlint_cmd(path, cold=False), cwd)
        _check_offlint(warm, f"{name} warm")
        result.warm.append(warm.wall)
        warm_counts = parsed_count(warm.stderr)
        result.warm_cached.append(warm_counts.get("cached", 0))
        result.warm_unread.append(warm_counts.get("unread", 0))
        result.warm_peak_mb = max(result.warm_peak_mb, warm.peak_rss / 1e6)
        result.startup.append(measure([*OFFLINT, "--version"], cwd).wall)
        print(
            f"  {name}: ruff {ruff.wall:.2f}s  cold {cold.wall:.2f}s  warm {warm.wall:.3f}s"
            f"  start-up {result.startup[-1]:.3f}s",
            flush=True,
        )
    return result


# --------------------------------------------------------------------------- scaling


def _link_copy(source: Path, target: Path) -> None:
    """A copy of the tree's .py files made of hard links (fast, same bytes)."""
    for folder, _dirs, names in os.walk(source):
        rel = Path(folder).relative_to(source)
        for name in names:
            if name.endswith(".py"):
                (target / rel).mkdir(parents=True, exist_ok=True)
                try:
                    os.link(Path(folder, name), target / rel / name)
                except OSError:
                    shutil.copy2(Path(folder, name), target / rel / name)


def bench_size(name: str, path: Path, factors: tuple[int, ...], repeat: int, workdir: Path) -> list[dict[str, float]]:
    rows = []
    for factor in factors:
        tree = workdir / f"{name}-x{factor}"
        if not tree.exists():
            for copy in range(factor):
                _link_copy(path, tree / f"copy{copy}")
        files, size = tree_stats(tree)
        walls, peak, parsed = [], 0, 0
        for _ in range(repeat):
            run = measure(offlint_cmd(tree, cold=True), workdir)
            _check_offlint(run, f"{name} x{factor}")
            walls.append(run.wall)
            peak = max(peak, run.peak_rss)
            parsed = parsed_count(run.stderr).get("parsed", 0)
        rows.append(
            {"factor": factor, "files": files, "megabytes": size / 1e6, "parsed": parsed,
             "cold_median_s": statistics.median(walls), "peak_mb": peak / 1e6}
        )
        print(f"  {name} x{factor}: {statistics.median(walls):.2f}s ({files} files, {parsed} parsed)", flush=True)
    return rows


def bench_share(path: Path, total: int, shares: tuple[float, ...], repeat: int, workdir: Path) -> list[dict[str, float]]:
    """Trees of `total` files from `path` where a given share passes the prefilter."""
    from offlint.analysis.engine import DecodeError, FileSettings, decode_source, may_hold_hazard
    from offlint.analysis.prefilter import rule_tokens

    settings = FileSettings(select=frozenset(rule_tokens()))
    passing: list[Path] = []
    failing: list[Path] = []
    for file in sorted(path.rglob("*.py")):
        try:
            text = decode_source(file.read_bytes())
        except (DecodeError, OSError):
            continue
        (passing if may_hold_hazard(text, settings) else failing).append(file)
    # typical sizes: drop the largest candidates so that the share, not a few giants, decides
    passing.sort(key=lambda f: f.stat().st_size)
    passing = passing[: max(1, int(len(passing) * 0.9))]
    rows = []
    for share in shares:
        want_pass = min(len(passing), round(total * share))
        chosen = passing[:: max(1, len(passing) // max(1, want_pass))][:want_pass] + failing[: total - want_pass]
        tree = workdir / f"share-{int(share * 100)}"
        if tree.exists():
            shutil.rmtree(tree)
        tree.mkdir()
        for index, file in enumerate(chosen):
            os.link(file, tree / f"f{index:05d}.py")
        walls, parsed = [], 0
        for _ in range(repeat):
            run = measure(offlint_cmd(tree, cold=True), workdir)
            _check_offlint(run, f"share {share}")
            walls.append(run.wall)
            parsed = parsed_count(run.stderr).get("parsed", 0)
        megabytes = sum(f.stat().st_size for f in chosen) / 1e6
        rows.append(
            {"share": share, "files": len(chosen), "megabytes": megabytes, "parsed": parsed,
             "cold_median_s": statistics.median(walls)}
        )
        print(f"  share {share:.0%}: {statistics.median(walls):.2f}s ({parsed} parsed of {len(chosen)})", flush=True)
    return rows


# --------------------------------------------------------------------------- report


def versions() -> dict[str, str]:
    from importlib.metadata import version

    found = {"python": platform.python_version()}
    for package in ("offlint", "libcst"):
        try:
            found[package] = version(package)
        except Exception:
            found[package] = "?"
    try:
        found["ruff"] = subprocess.run([RUFF, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        found["ruff"] = "?"
    return found


def machine() -> dict[str, object]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    return {"platform": platform.platform(), "cpus": os.cpu_count(), "cpu": model, "loadavg_at_start": load}


def render(payload: dict) -> str:
    lines = [
        f"offlint check vs ruff check --select ALL - {payload['date']}",
        f"machine: {payload['machine']['cpus']} cpus, {payload['machine']['cpu']}, load at start "
        f"{payload['machine']['loadavg_at_start'][0]:.2f}",
        "versions: " + ", ".join(f"{k} {v}" for k, v in payload["versions"].items()),
        f"command: {payload['command']}",
        "",
        f"{'tree':<11}{'files':>7}{'MB':>7}{'parsed':>8}{'ruff s':>9}{'cold s':>9}{'warm s':>9}"
        f"{'cold/ruff':>10}{'cold/warm':>10}{'peak MB':>9}{'ruff MB':>9}{'start s':>9}",
    ]
    for tree in payload["trees"]:
        s = tree["summary"]
        lines.append(
            f"{tree['tree']:<11}{tree['files']:>7}{tree['megabytes']:>7.1f}{tree['parsed']:>8}"
            f"{s['ruff_median_s']:>9.2f}{s['cold_median_s']:>9.2f}{s['warm_median_s']:>9.3f}"
            f"{s['cold_over_ruff']:>10.2f}{s['cold_over_warm']:>10.1f}{tree['cold_peak_mb']:>9.0f}"
            f"{tree['ruff_peak_mb']:>9.0f}{s.get('startup_median_s', float('nan')):>9.3f}"
        )
    lines.append(
        "start s: `offlint --version` (interpreter, click, the CLI): the floor under every run, warm ones"
        " included"
    )
    if payload.get("size_scaling"):
        lines += ["", "cold time vs tree size (hard-linked copies):"]
        base = payload["size_scaling"][0]
        for row in payload["size_scaling"]:
            lines.append(
                f"  x{row['factor']}: {row['files']} files, {row['megabytes']:.1f} MB, {row['parsed']} parsed:"
                f" {row['cold_median_s']:.2f}s ({row['cold_median_s'] / base['cold_median_s']:.2f}x of x1),"
                f" peak {row['peak_mb']:.0f} MB"
            )
    if payload.get("share_scaling"):
        lines += ["", "cold time vs share of files passing the prefilter:"]
        for row in payload["share_scaling"]:
            lines.append(
                f"  {row['share']:>4.0%}: {row['files']} files, {row['megabytes']:.1f} MB, {row['parsed']} parsed:"
                f" {row['cold_median_s']:.2f}s"
            )
    for tree in payload["trees"]:
        lines.append(
            f"\n{tree['tree']} runs (s): ruff {', '.join(f'{w:.2f}' for w in tree['ruff'])};"
            f" cold {', '.join(f'{w:.2f}' for w in tree['cold'])}; warm {', '.join(f'{w:.3f}' for w in tree['warm'])};"
            f" start-up {', '.join(f'{w:.3f}' for w in tree.get('startup', []))}"
            f" (files from cache per warm run: {tree['warm_cached']}, not even read: {tree.get('warm_unread')})"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default=",".join(DEFAULT_TREES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale-tree", default="deepspeed", help="tree for the 1x/2x/4x size series ('' = skip)")
    parser.add_argument("--share-tree", default="sglang", help="tree for the prefilter-share series ('' = skip)")
    parser.add_argument("--share-files", type=int, default=400)
    parser.add_argument("--series-repeat", type=int, default=1, help="runs per point of the size/share series")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)

    payload: dict = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "command": "python -m benchmarks.bench_check " + " ".join(argv if argv is not None else sys.argv[1:]),
        "trees": [],
    }
    workdir = Path(tempfile.mkdtemp(prefix="offlint-bench-"))
    snapshot = workdir / "snapshot"
    shutil.copytree(REPO / "offlint", snapshot / "offlint", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "rules", snapshot / "rules")
    # byte-compiled, as an installed package is (pip compiles on install): otherwise every run,
    # warm ones above all, would compile offlint's modules again (PYTHONDONTWRITEBYTECODE)
    compileall.compile_dir(snapshot / "offlint", quiet=1)
    ENV["PYTHONPATH"] = os.pathsep.join(filter(None, [str(snapshot), os.environ.get("PYTHONPATH", "")]))
    ENV.pop("PRE_COMMIT", None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")

    def write() -> str:
        """Written after every stage: a run cut short still leaves its numbers."""
        (out / f"bench-{stamp}.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        text = render(payload)
        (out / f"bench-{stamp}.txt").write_text(text, encoding="utf-8")
        (out / "latest.txt").write_text(text, encoding="utf-8")
        return text

    try:
        paths: dict[str, Path] = {}
        for name in [t for t in args.trees.split(",") if t]:
            try:
                paths[name] = get_tree(name)
            except TreeUnavailable as exc:
                print(f"{name}: skipped: {exc}", flush=True)
                payload.setdefault("skipped", {})[name] = str(exc)
        for name, path in list(paths.items()):
            print(f"{name}: {path}", flush=True)
            result = bench_tree(name, path, args.repeat, workdir)
            payload["trees"].append({**asdict(result), "summary": result.summary})
            write()
        for extra in (args.scale_tree, args.share_tree):
            if extra and extra not in paths:
                try:
                    paths[extra] = get_tree(extra)
                except TreeUnavailable as exc:
                    print(f"{extra}: skipped: {exc}", flush=True)
        if args.scale_tree and args.scale_tree in paths:
            print("size scaling", flush=True)
            payload["size_scaling"] = bench_size(args.scale_tree, paths[args.scale_tree], (1, 2, 4), args.series_repeat, workdir)
            write()
        if args.share_tree and args.share_tree in paths:
            print("prefilter share", flush=True)
            payload["share_scaling"] = bench_share(
                paths[args.share_tree], args.share_files, (0.0, 0.05, 0.1, 0.25, 0.5), args.series_repeat, workdir
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = write()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
