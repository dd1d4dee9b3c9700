"""The compiled life cycle (`offlint probe --compiled`, issue 17 item 1b) dry-run on the CPU with
torch.cuda faked (tests/test_probe_cpu.py's `fake_cuda`) and torch.compile on the "eager"
backend: the phases it adds, the counters it reads and how the report words them. What CUDA and
Inductor make of it is tests/test_probe_gpu.py's business."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from offlint.probing.options import ModelConfig, build_options
from offlint.probing.scenario import compiled_verdict
from offlint.probing.spec import ScenarioSpec
from tests.test_probe_cpu import DATA, fake_cuda  # noqa: F401 (a fixture)

torch = pytest.importorskip("torch")


@pytest.fixture
def eager_compile(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """torch.compile on the eager backend (no compiler, no CUDA graphs), noting its options."""
    seen: list[dict[str, Any]] = []
    real = torch.compile

    def compile_eagerly(model: Any, **options: Any) -> Any:
        seen.append(options)
        return real(model, backend="eager", fullgraph=options.get("fullgraph", False))

    monkeypatch.setattr(torch, "compile", compile_eagerly)
    return seen


def _spec(mode: str) -> ScenarioSpec:
    return ScenarioSpec(
        name=f"dry-{mode}",
        target=f"{DATA / 'cpu_offloader.py'}:CpuOffloader",
        model=ModelConfig(
            layers=8, hidden=32, dtype="float32", batch_sizes=(8, 4), offload_every=4, prefetch=1
        ),
        replay_rounds=2,
        warmup_iters=1,
        timing_iters=3,
        compiled=mode,
    )


@pytest.mark.usefixtures("fake_cuda")
@pytest.mark.parametrize("mode", ["fullgraph", "reduce-overhead"])
def test_compiled_life_cycle_dry_run(
    mode: str,
    eager_compile: list[dict[str, Any]],
) -> None:
    from offlint.probing.scenario import ScenarioRun

    raw = ScenarioRun(_spec(mode), device=torch.device("cpu")).run()
    assert raw["phase_errors"] == [], raw["phase_errors"]
    assert raw["phases"]["compiled"] == "ok"
    assert raw["phases"]["capture"] == "ok"
    assert eager_compile[0] == ({"fullgraph": True} if mode == "fullgraph" else {"mode": mode})
    compiled = raw["compiled"]
    assert compiled["mode"] == mode and compiled["fell_back"] is False
    # Dynamo's own counters: one graph per shape, no break (the fake capture check is a lambda).
    assert compiled["graph_breaks"] == 0
    assert compiled["unique_graphs"] >= 1
    assert compiled["ran"].startswith("compiled as one graph per shape")
    phases = [step["phase"] for step in raw["steps"]]
    assert "compiled" in phases
    assert phases.count("replay") == 4  # 2 rounds x 2 batch sizes
    if mode == "reduce-overhead":
        # the compiled forward's own graphs: three calls per batch size, an uncompiled forward
        # after them, replays and timing of the compiled calls
        assert phases.count("capture") == 6
        assert raw["capture"]["by"].startswith("torch.compile(mode='reduce-overhead')")
        assert any("uncompiled" in s["note"] for s in raw["steps"])
    # (a faked graph replays nothing: replays by hand cannot be right; compiled calls are)
    checked = [s for s in raw["steps"] if mode == "reduce-overhead" or "replay" not in s["phase"]]
    assert all(s["rel_err"] < 1e-5 for s in checked), [s for s in checked if not s["exact"]]
    assert set(raw["timing"]["graph"]) == {"8", "4"}
    assert "hazards" not in raw  # the sanitizer stays off a compiled life cycle
    json.dumps(raw)


@pytest.mark.usefixtures("fake_cuda")
def test_a_forward_that_cannot_compile_falls_back_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from offlint.probing.scenario import ScenarioRun

    def refuse(model: Any, **options: Any) -> Any:
        def compiled(*args: Any) -> Any:
            raise RuntimeError("torch.* op returned non-Tensor bool call_function is_capturing")

        return compiled

    monkeypatch.setattr(torch, "compile", refuse)
    raw = ScenarioRun(_spec("fullgraph"), device=torch.device("cpu")).run()
    assert raw["compiled"]["fell_back"] is True
    assert "non-Tensor" in raw["compiled"]["error"]["reason"]
    assert raw["compiled"]["ran"] == "fell back to eager: the forward did not compile"
    assert raw["phases"]["capture"] == "ok"  # the life cycle went on, eagerly
    assert all(s["exact"] for s in raw["steps"] if "replay" not in s["phase"])


def test_verdict_words() -> None:
    assert compiled_verdict({"fell_back": True}).startswith("fell back to eager")
    assert compiled_verdict({"graph_breaks": 0, "unique_graphs": 0}).startswith("fell back")
    text = compiled_verdict(
        {"mode": "reduce-overhead", "graph_breaks": 3, "unique_graphs": 4, "cudagraph_skips": 2}
    )
    assert "3 graph break(s), 4 graph(s)" in text and "CUDA graphs skipped 2 time(s)" in text


def test_compiled_option_is_validated_and_reaches_the_options() -> None:
    assert build_options({"compiled": "reduce-overhead"}, {}).compiled == "reduce-overhead"
    from offlint.probing.command import probe_command

    result = CliRunner().invoke(probe_command, ["--compiled", "sideways"])
    assert result.exit_code == 2
    assert "sideways" in result.output
