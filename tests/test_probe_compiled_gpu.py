"""The compiled life cycle on a GPU (issue 17, item 1b): the merged inline fix asks
`torch.cuda.is_current_stream_capturing()` in its hooks, which Dynamo cannot trace
(shared/GROUND-TRUTH.md §1): under fullgraph=True the forward does not compile and the life
cycle falls back to eager, saying why; under mode="reduce-overhead" it compiles in pieces, and
Dynamo's own counters show the graph breaks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

REPO = Path(__file__).resolve().parent.parent


def _probe(tmp_path: Path, mode: str) -> dict[str, Any]:
    output = tmp_path / f"{mode}.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "offlint.probing",
            "--compiled",
            mode,
            "--scenario",
            "inline",
            "--layers",
            "8",
            "--hidden",
            "1024",
            "--batch-sizes",
            "256,128",
            "--warmup-iters",
            "2",
            "--timing-iters",
            "5",
            "--timeout",
            "300",
            "-o",
            str(output),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert output.is_file(), completed.stdout + completed.stderr
    document: dict[str, Any] = json.loads(output.read_text())
    raw: dict[str, Any] = document["scenarios"][0]["raw"]
    assert "compiled" in raw, (raw.get("phases"), raw.get("phase_errors"), raw.get("worker_error"))
    return raw


def test_fullgraph_falls_back_on_the_capture_check(tmp_path: Path) -> None:
    raw = _probe(tmp_path, "fullgraph")
    compiled = raw["compiled"]
    assert compiled["fell_back"] is True, compiled
    assert compiled["ran"].startswith("fell back to eager")
    error = compiled["error"]
    said = f"{error['reason']} {(error.get('source') or {}).get('code', '')}"
    assert "is_current_stream_capturing" in said or "non-Tensor" in said, error
    assert raw["phases"]["capture"] == "ok"  # the eager fallback still captures
    assert any(step["phase"] == "replay" for step in raw["steps"])


def test_reduce_overhead_counts_graph_breaks(tmp_path: Path) -> None:
    raw = _probe(tmp_path, "reduce-overhead")
    compiled = raw["compiled"]
    assert compiled["fell_back"] is False, compiled
    assert compiled["graph_breaks"] >= 1, compiled
    assert compiled["unique_graphs"] >= 1
    assert "partly compiled" in compiled["ran"]
    assert raw["timing"]["graph"], raw["phases"]
