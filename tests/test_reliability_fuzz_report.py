"""benchmarks/fuzz.py's report of a long run made in chunks (`--merge`) or stopped early (SIGTERM):
the figures add up, and a partial run says it is partial."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

_SPEC = importlib.util.spec_from_file_location(
    "offlint_fuzz_report", Path(__file__).resolve().parent.parent / "benchmarks" / "fuzz.py"
)
assert _SPEC is not None and _SPEC.loader is not None
fuzz = importlib.util.module_from_spec(_SPEC)
sys.modules["offlint_fuzz_report"] = fuzz
_SPEC.loader.exec_module(fuzz)


def _result(n: int, origin: str, found: list[tuple[str, str]], seconds: float) -> Any:
    return (n, origin, found, seconds, True, "x = 1\n" if found else None)


def test_chunks_add_up_to_one_run(tmp_path: Path) -> None:
    first = fuzz.summarize(
        [_result(0, "generated", [], 0.5), _result(1, "real-mutated", [("hang", "killed")], 10.0)],
        [],
        command="python benchmarks/fuzz.py --inputs 2 --seed 0",
        elapsed=11.0,
        planned=2,
        stopped=None,
    )
    second = fuzz.summarize(
        [_result(2, "generated", [("front-ends-differ-deep", "deep")], 0.2)],
        [3],  # a worker died on input 3
        command="python benchmarks/fuzz.py --inputs 50 --seed 2",
        elapsed=4.0,
        planned=50,
        stopped="SIGTERM",
    )
    paths = []
    for index, summary in enumerate((first, second)):
        path = tmp_path / f"part{index}.json"
        path.write_text(json.dumps(summary))
        paths.append(str(path))
    assert fuzz.main(["--merge", *paths, "--out", str(tmp_path / "all")]) == 1
    merged = json.loads((tmp_path / "all.json").read_text())
    assert merged["inputs"] == 4
    assert merged["inputs_by_origin"] == {"generated": 2, "real-mutated": 1}
    assert merged["failed_inputs"] == 2  # the hang and the crash; a too-deep input is not a failure
    assert merged["failures_by_kind"] == {"hang": 1, "front-ends-differ-deep": 1, "process-crash": 1}
    assert merged["seconds"] == 15.0
    assert merged["slowest_inputs"][0] == {"input": 1, "seconds": 10.0}
    assert merged["parts"] == [first["command"], second["command"]]
    assert merged["stopped_early"] == [
        {"command": second["command"], "signal": "SIGTERM", "inputs_planned": 50}
    ]
    text = (tmp_path / "all.txt").read_text()
    assert text.startswith("fuzz: 4 inputs (2 runs merged) in 15.0 s\n")
    assert "STOPPED EARLY (SIGTERM)" in text and "hang: 1" in text


def test_a_complete_run_is_not_marked_partial() -> None:
    summary = fuzz.summarize(
        [_result(0, "generated", [], 0.1)], [], command="c", elapsed=0.1, planned=1, stopped=None
    )
    assert "stopped_early" not in summary
    assert "STOPPED" not in fuzz.render_text(summary, title="seed 0", timeout=10.0)
