"""Capture regions reach functions of other modules of the checked tree (analysis/callgraph.py):
through `import` and `from … import`, relative imports, several modules deep, in cold and warm
runs alike; what no capture region reaches stays clean, and so does the capture driver itself."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offlint.analysis.callgraph import ModuleNames, _absolute

FILES = {
    "pkg/__init__.py": "",
    "pkg/runner.py": """\
        import torch

        from pkg.helpers import step

        from .other import relstep


        def capture(x):
            g = torch.cuda.CUDAGraph()
            torch.cuda.synchronize()  # the driver's own set-up runs before the capture
            with torch.cuda.graph(g):
                step(x)
                relstep(x)
            return g
        """,
    "pkg/helpers.py": """\
        def step(x):
            return _inner(x)


        def _inner(x):
            return x.sum().item()


        def unrelated(x):
            return x.sum().item()
        """,
    "pkg/other.py": """\
        from pkg import deeper


        def relstep(x):
            deeper.go(x)
        """,
    "pkg/deeper.py": """\
        def go(x):
            return x.tolist()
        """,
}
EXPECTED = [
    (
        "pkg/deeper.py",
        2,
        "OFL105",
        "high",
        "capture-reachable: called from pkg.other.relstep ← pkg.runner.capture (inside a CUDA graph capture region)",
    ),
    (
        "pkg/helpers.py",
        6,
        "OFL105",
        "high",
        "capture-reachable: called from step ← pkg.runner.capture (inside a CUDA graph capture region)",
    ),
]


def _project(root: Path) -> Path:
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def _check(root: Path, *args: str) -> list[tuple[str, int, str, str, str]]:
    done = subprocess.run(
        [sys.executable, "-m", "offlint", "check", "pkg", "--output-format", "offlint-json", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    found = json.loads(done.stdout)["diagnostics"]
    return [(d["filename"], d["location"]["row"], d["code"], d["confidence"], d["note"]) for d in found]


@pytest.mark.parametrize("parser", ["cpython", "libcst"])
def test_capture_regions_reach_other_modules(tmp_path: Path, parser: str) -> None:
    root = _project(tmp_path)
    assert _check(root, "--no-cache", "--parser", parser) == EXPECTED


def test_warm_runs_and_workers_agree(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert _check(root) == EXPECTED  # cold, fills the cache
    assert _check(root) == EXPECTED  # warm: every file served from the cache, seeds included
    timings = subprocess.run(
        [sys.executable, "-m", "offlint", "check", "pkg", "--timings"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stderr
    assert ", 0 parsed" in timings  # the seeds are the same every run, so is their cache key
    assert _check(root, "--no-cache", "-j", "2") == EXPECTED


def test_an_edit_that_drops_the_call_drops_the_finding(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert _check(root) == EXPECTED
    runner = root / "pkg" / "runner.py"
    runner.write_text(runner.read_text().replace("        relstep(x)\n", ""), encoding="utf-8")
    assert _check(root) == EXPECTED[1:]


def test_module_names_follow_the_packages(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "script.py").write_text("x = 1\n")
    names = ModuleNames()
    assert names.of(str(root / "pkg" / "helpers.py")) == "pkg.helpers"
    assert names.of(str(root / "pkg" / "__init__.py")) == "pkg"
    assert names.of(str(root / "script.py")) == "script"
    assert _absolute(".other.relstep", "pkg.runner", False) == "pkg.other.relstep"
    assert _absolute("..x.f", "pkg.sub.mod", False) == "pkg.x.f"
    assert _absolute(".mod.f", "pkg.sub", True) == "pkg.sub.mod.f"
    assert _absolute("pkg.helpers.step", "pkg.runner", False) == "pkg.helpers.step"
