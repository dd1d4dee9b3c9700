"""`offlint probe` on a real GPU, at a small size (the heavy run is benchmarks/probe_gpu.sh).

Each scenario runs in its own worker process, as the probe runs it. Skipped cleanly where torch
or a CUDA device is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from offlint.probing.checks import VERDICT_EXPECTED, Thresholds, evaluate_scenario
from offlint.probing.options import ModelConfig
from offlint.probing.spec import ScenarioSpec

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
# 8 layers, the last of every 4 offloaded: layers 3 and 7, so 2 copies per step.
SMALL = ModelConfig(
    layers=8, hidden=1024, dtype="bfloat16", batch_sizes=(256, 128), offload_every=4, prefetch=1
)
OFFLOADED = len(SMALL.offloaded_layers)


def _run(fixture: str, attr: str = "Offloader", **overrides: Any) -> dict[str, Any]:
    from offlint.probing.runner import run_worker

    settings: dict[str, Any] = {"timing": False, "compile": False, "replay_rounds": 2}
    settings.update(overrides)
    spec = ScenarioSpec(
        name=fixture, target=f"{FIXTURES / fixture}:{attr}", model=SMALL, **settings
    )
    raw = run_worker(spec, timeout_s=300)
    assert "worker_error" not in raw, raw.get("worker_error")
    return raw


def _steps(raw: dict[str, Any], phase: str) -> list[dict[str, Any]]:
    return [step for step in raw["steps"] if step["phase"] == phase]


def _copies_per_replay(raw: dict[str, Any]) -> set[float]:
    return {entry["copies"] for entry in raw["h2d"]["per_replay"].values()}


def test_original_fails_capture_with_905_at_the_users_wait() -> None:
    raw = _run("sglang_offloader_original.py")
    assert all(step["exact"] for step in _steps(raw, "eager"))
    error = raw["capture"]["error"]
    assert raw["capture"]["ok"] is False
    assert error["batch"] == SMALL.batch_sizes[0]
    assert error["root"]["cuda_code"] == 905
    assert error["root"]["cuda_name"] == "cudaErrorStreamCaptureIsolation"
    assert error["chain"][0]["cuda_code"] == 901  # what PyTorch surfaces
    assert Path(error["source"]["file"]).name == "sglang_offloader_original.py"
    assert error["source"]["function"] == "wait_and_get_device_tensors"
    assert error["source"]["code"].split("#")[0].strip() == "self._load_event.wait()"
    assert raw["phases"]["replay"] == "skipped: capture failed"


def test_the_engine_hooks_drive_a_module_offloader_into_the_same_905() -> None:
    raw = _run("sglang_offloader_original.py", attr="_ModuleOffloader")
    assert raw["target_shape"] == "module-offloader"
    assert all(step["exact"] for step in _steps(raw, "eager"))
    assert raw["capture"]["error"]["root"]["cuda_code"] == 905


@pytest.mark.parametrize("strategy", ["overlap", "inline"])
def test_fix_outputs_without_an_owner_are_exact_under_the_engine_hooks(strategy: str) -> None:
    """`offlint fix` on a module with no owner class (the end-of-forward-join fallback for
    overlap), driven as a per-module offloader the way the graph runner drives SGLang's."""
    raw = _run(f"golden/module_offloader_no_owner/out_{strategy}.py", attr="_ModuleOffloader")
    assert raw["target_shape"] == "module-offloader"
    assert raw["capture"]["ok"], raw["capture"]
    for phase in ("eager", "eager_after_capture", "replay"):
        steps = _steps(raw, phase)
        assert steps and all(step["exact"] for step in steps), (phase, steps)


def test_merged_inline_fix_captures_but_breaks_eager_and_copies_twice() -> None:
    raw = _run("sglang_offloader_inline.py")
    assert raw["capture"]["ok"]
    assert all(step["exact"] for step in _steps(raw, "replay"))
    assert all(step["exact"] for step in _steps(raw, "replay_after_update"))
    wrong = [s for s in _steps(raw, "eager_after_capture") if (s["rel_err"] or 2.0) > 0.5]
    assert wrong, _steps(raw, "eager_after_capture")
    assert _copies_per_replay(raw) == {OFFLOADED + 1.0}
    assert {e["copies"] for e in raw["h2d"]["per_eager_step"].values()} == {float(OFFLOADED)}


@pytest.mark.parametrize(
    "fixture",
    [
        "sglang_offloader_inline_fixed.py",
        "sglang_offloader_overlap.py",
        # what `offlint fix` writes, from the original and from the merged upstream fix
        "golden/sglang_original/out_overlap.py",
        "golden/sglang_original/out_inline.py",
        "golden/sglang_merged_inline/out_overlap.py",
        "golden/sglang_merged_inline/out_inline.py",
    ],
)
def test_correct_fixes_are_exact_everywhere_with_one_copy_per_weight(fixture: str) -> None:
    raw = _run(fixture)
    assert raw["phase_errors"] == []
    assert raw["capture"]["ok"]
    for phase in ("eager", "eager_after_capture", "replay", "replay_after_update"):
        steps = _steps(raw, phase)
        assert steps and all(step["exact"] for step in steps), (phase, steps)
    assert raw["weight_update"]["applied"]
    assert all(weight["pinned"] for weight in raw["host_weights"])
    assert _copies_per_replay(raw) == {float(OFFLOADED)}


def test_overlap_fix_is_timed_and_compile_is_reported() -> None:
    raw = _run(
        "sglang_offloader_overlap.py", timing=True, compile=True, warmup_iters=3, timing_iters=10
    )
    evaluation = evaluate_scenario(raw, Thresholds(max_graph_slowdown=10.0), None)
    assert evaluation["verdict"] == "pass", evaluation["problems"]
    derived = evaluation["derived"][str(SMALL.batch_sizes[0])]
    assert derived["graph_ms"] > 0 and derived["eager_ms"] > 0 and derived["compute_ms"] > 0
    assert raw["timing"]["h2d"]["gb_per_s"] > 1.0
    compile_result = raw["compile"]
    assert compile_result["ok"] is False  # is_current_stream_capturing() is not traceable
    assert compile_result["reason"]


def test_a_real_capture_error_is_walked_to_its_root(tmp_path: Path) -> None:
    from offlint.probing.cuda_errors import describe_exception

    x = torch.ones(8, device="cuda")
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            x.mul_(2)
            torch.cuda.synchronize()
    except Exception as exc:
        described = describe_exception(exc, [__file__])
    else:
        pytest.fail("capture with a synchronize inside did not fail")
    assert described["root"]["cuda_code"] == 900
    assert described["source"]["code"] == "torch.cuda.synchronize()"
    torch.cuda.synchronize()  # the context survived


def test_bundled_run_from_the_command_line_matches_every_expectation(tmp_path: Path) -> None:
    output = tmp_path / "run.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "offlint.probing",
            "--demo",
            "--layers",
            "8",
            "--hidden",
            "1024",
            "--batch-sizes",
            "256,128",
            "--no-timing",
            "--no-compile",
            "--output",
            str(output),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads(output.read_text())
    verdicts = {s["name"]: s["evaluation"]["verdict"] for s in document["scenarios"]}
    assert verdicts == dict.fromkeys(
        ("original", "inline", "inline-fixed", "overlap"), VERDICT_EXPECTED
    )
    assert "as expected" in completed.stdout


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_scenarios_spread_over_gpus(tmp_path: Path) -> None:
    output = tmp_path / "run.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "offlint.probing",
            "--gpu",
            "0,1",
            "--layers",
            "8",
            "--hidden",
            "1024",
            "--batch-sizes",
            "256,128",
            "--no-timing",
            "--no-compile",
            "--scenario",
            "overlap",
            "--scenario",
            "inline-fixed",
            "--output",
            str(output),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads(output.read_text())
    assert {s["raw"]["device_index"] for s in document["scenarios"]} == {0, 1}
