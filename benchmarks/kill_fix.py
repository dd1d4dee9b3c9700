"""`kill -9` at random moments during `offlint fix --apply`: no file is ever half written, and the
next run leaves no temporary file behind (issue 15, "Done when").

    .venv/bin/python -m benchmarks.kill_fix [--files 200] [--kills 50] [--seed 0] [--out FILE]

A tree of `--files` files (the fixable fixtures and rule examples, each copy made distinct by a
comment, and clean files between them) is fixed once without interruption: those bytes are what
"fully fixed" means. Then, over and over, `fix --apply` runs on the tree and is killed with
SIGKILL after a random delay (anywhere from before Python has started to the end of a run);
after each kill every file must hold its original bytes or its fully fixed ones, nothing else.
Each run is the "next run" of the one killed before it: the temporary files a killed run left
(named with its pid) must be gone once the next run has got past its start. When every file is
fixed the tree is reset to the originals. At the end one run goes uninterrupted: no temporary
file may be left and every file must be fully fixed.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
COMMAND = [sys.executable, "-m", "offlint", "fix", "--apply", "--exit-zero", "--select", "ALL", "tree"]
TEMP = re.compile(r"^\..+\.(?P<pid>[0-9]+)-[0-9a-f]{12}\.offlint-tmp$")


def fixable_sources() -> list[bytes]:
    from offlint.catalogue import load_catalogue

    sources = [path.read_bytes() for path in sorted((REPO / "fixtures").glob("*.py"))]
    for spec in load_catalogue().values():
        sources += [example.code.encode() for example in spec.bad if example.fixed]
    return sources


def make_tree(root: Path, files: int) -> dict[str, bytes]:
    sources = fixable_sources()
    originals = {}
    for index in range(files):
        name = f"pkg{index % 4}/m{index:03d}.py"
        data = sources[index % len(sources)] + f"\n# copy {index}\n".encode()
        originals[name] = data
    return originals


def write_tree(root: Path, contents: dict[str, bytes]) -> None:
    for name, data in contents.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def read_tree(root: Path, names: list[str]) -> dict[str, bytes]:
    return {name: (root / name).read_bytes() for name in names}


def temp_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if TEMP.match(path.name)]


def trials(
    files: int, kills: int, seed: int, scratch: Path | None = None, *, progress: bool = False
) -> tuple[list[str], list[str]]:
    """`kills` SIGKILLs of `fix --apply` at random moments on a tree of `files` files (in a
    temporary folder under `scratch`): (problems, log lines). No problem: no half file ever."""
    r = random.Random(seed)
    problems: list[str] = []
    log: list[str] = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))}

    with tempfile.TemporaryDirectory(prefix="offlint-kill-", dir=scratch) as folder:
        work = Path(folder)
        originals = make_tree(work / "tree", files)
        names = sorted(originals)
        write_tree(work / "tree", originals)
        started = time.perf_counter()
        subprocess.run(COMMAND, cwd=work, capture_output=True, check=False, env=env)
        full_run = time.perf_counter() - started
        expected = read_tree(work / "tree", names)
        changed = sum(1 for name in names if expected[name] != originals[name])
        log.append(f"tree: {files} files, {changed} changed by a full `fix --apply` ({full_run:.1f} s)")
        if not changed:
            problems.append("nothing to fix: the test would prove nothing")
        write_tree(work / "tree", originals)

        done = 0
        temps_seen = 0
        earlier_pids: set[int] = set()
        half_written = 0
        resets = 0
        mixed = 0  # kills after which some files were fixed and others not: the kill was mid-write
        while done < kills:
            delay = r.uniform(0.0, full_run * 1.1)
            process = subprocess.Popen(COMMAND, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            finished = False
            try:
                process.wait(timeout=delay)
                finished = True
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
                done += 1
            now = read_tree(work / "tree", names)
            for name in names:
                if now[name] not in (originals[name], expected[name]):
                    half_written += 1
                    problems.append(f"kill {done} after {delay:.2f} s: {name} is neither original nor fixed")
            fixed_now = sum(1 for name in names if now[name] == expected[name] != originals[name])
            mixed += int(not finished and 0 < fixed_now < changed)
            temps = temp_files(work / "tree")
            temps_seen += len(temps)
            stale = [t for t in temps if int(TEMP.match(t.name)["pid"]) in earlier_pids]  # type: ignore[index]
            if stale and delay > 2.0:  # the run got past its start: it must have removed them
                problems.append(f"run {process.pid}: {len(stale)} temporary files of earlier runs left")
            earlier_pids.add(process.pid)
            if progress and not finished and done % 50 == 0:
                print(
                    f"kill_fix: {done} kills, {mixed} mid-write, {half_written} files neither original nor fixed",
                    file=sys.stderr,
                    flush=True,
                )
            if finished or all(now[name] == expected[name] for name in names):
                write_tree(work / "tree", originals)  # start again from the originals
                resets += 1
        # the next run, uninterrupted
        subprocess.run(COMMAND, cwd=work, capture_output=True, check=False, env=env)
        left = temp_files(work / "tree")
        final = read_tree(work / "tree", names)
        if left:
            problems.append(f"after the last run: {len(left)} temporary files left")
        not_fixed = [name for name in names if final[name] != expected[name]]
        if not_fixed:
            problems.append(f"after the last run: {len(not_fixed)} files not fully fixed")
        log.append(
            f"kills: {done} (SIGKILL after 0-{full_run * 1.1:.1f} s), tree reset {resets} times;"
            f" kills that landed mid-write (some files fixed, some not): {mixed};"
            f" files neither original nor fixed after a kill: {half_written};"
            f" temporary files seen right after a kill: {temps_seen};"
            f" left after the next run: {len(left)}; files not fully fixed after it: {len(not_fixed)}"
        )
    log.append("result: " + ("PASS" if not problems else "FAIL"))
    log += [f"  {problem}" for problem in problems[:20]]
    return problems, log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    problems, log = trials(args.files, args.kills, args.seed, progress=True)
    text = "\n".join(log) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(f"python -m benchmarks.kill_fix --files {args.files} --kills {args.kills} --seed {args.seed}\n" + text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
