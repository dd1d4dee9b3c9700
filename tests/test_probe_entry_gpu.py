"""`offlint probe --entry` on a real GPU: the bundled examples (a diffusers-style group
offloader, a vLLM-style prefetcher, SGLang's shape, accelerate's real cpu_offload) driven
through the decode-graph life cycle, each in its worker process, at small sizes.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from offlint.probing.entry import resolve_entry_spec
from offlint.probing.options import ModelConfig
from offlint.probing.spec import ScenarioSpec

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


def _run(name: str, **init_kwargs: Any) -> dict[str, Any]:
    from offlint.probing.runner import run_worker

    spec = ScenarioSpec(
        name=name,
        target=resolve_entry_spec(name),
        model=ModelConfig(),
        entry=True,
        init_kwargs=init_kwargs,
        timing=False,
        replay_rounds=2,
    )
    raw = run_worker(spec, timeout_s=300)
    assert "worker_error" not in raw, raw.get("worker_error")
    assert raw["phases"]["setup"] == "ok", raw["phase_errors"]
    return raw


def _steps(raw: dict[str, Any], phase: str) -> list[dict[str, Any]]:
    return [step for step in raw["steps"] if step["phase"] == phase]


def _hazard(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["capture"]["error"]["hazard"]


def test_group_offload_with_a_stream_is_wrong_eagerly_and_syncs_in_capture() -> None:
    raw = _run("group-offload", variant="stream")
    assert any((s["rel_err"] or 2.0) > 0.05 for s in _steps(raw, "eager")), _steps(raw, "eager")
    assert raw["capture"]["ok"] is False
    hazard = _hazard(raw)
    assert hazard["rule"] == "OFL105"
    # the line as written, with the example's own suppression comment after the call
    assert hazard["here"][0]["code"].split("#")[0].strip() == "self.stream.synchronize()"
    assert Path(hazard["here"][0]["file"]).name == "group_offload.py"


def test_group_offload_with_a_layer_outside_the_list_copies_pageable_memory() -> None:
    raw = _run("group-offload", variant="outside")
    assert all(s["exact"] for s in _steps(raw, "eager"))
    assert any(not w["pinned"] for w in raw["host_weights"])
    error = raw["capture"]["error"]
    assert "pinned" in error["root"]["message"]
    assert _hazard(raw)["rule"] == "OFL106"
    assert "host.to(" in _hazard(raw)["here"][0]["code"]


def test_group_offload_leaf_level_inline_is_exact() -> None:
    raw = _run("group-offload", variant="leaf")
    assert raw["capture"]["ok"], raw["capture"]
    for phase in ("eager", "eager_after_capture", "replay"):
        assert all(s["exact"] for s in _steps(raw, phase)), phase
    assert raw.get("hazards", []) == []


def test_prefetch_offload_captures_exactly_with_one_copy_per_layer() -> None:
    raw = _run("prefetch-offload", layers=8, hidden=1024)
    assert raw["capture"]["ok"], raw["capture"]
    for phase in ("eager", "eager_after_capture", "replay"):
        steps = _steps(raw, phase)
        assert steps and all(s["exact"] for s in steps), (phase, steps)
    assert {e["copies"] for e in raw["h2d"]["per_replay"].values()} == {2.0}
    assert raw["expected_copies"] == 2
    assert raw.get("hazards", []) == []
    updated = _steps(raw, "replay_after_update")
    # The wrap-around prefetch filled the first slot before the update: only the first replay
    # after it is stale.
    assert not updated[0]["exact"] and all(s["exact"] for s in updated[1:]), updated


def test_sglang_original_fails_905_and_the_sanitizer_names_both_lines() -> None:
    raw = _run("sglang-offload", fixture="original", layers=8, hidden=1024)
    error = raw["capture"]["error"]
    assert error["root"]["cuda_code"] == 905
    assert error["source"]["code"].split("#")[0].strip() == "self._load_event.wait()"
    hazard = _hazard(raw)
    assert hazard["rule"] == "OFL101"
    assert hazard["here"][0]["code"].split("#")[0].strip() == "self._load_event.wait()"
    assert hazard["other"][0]["code"] == "self._load_event.record()"


def test_sglang_merged_fix_reads_capture_made_tensors_eagerly() -> None:
    raw = _run("sglang-offload", fixture="inline", layers=8, hidden=1024)
    assert raw["capture"]["ok"]
    assert any((s["rel_err"] or 2.0) > 0.5 for s in _steps(raw, "eager_after_capture"))
    rules = {hazard["rule"] for hazard in raw.get("hazards", [])}
    assert "OFL201" in rules, raw.get("hazards")


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is None, reason="needs accelerate")
def test_accelerate_cpu_offload_copies_pageable_memory_in_capture() -> None:
    raw = _run("accelerate-offload", hidden=1024)
    assert all(s["exact"] for s in _steps(raw, "eager"))
    assert raw["capture"]["ok"] is False
    assert "pinned" in raw["capture"]["error"]["root"]["message"]
    assert _hazard(raw)["rule"] == "OFL106"
