"""Plan the scenarios, check torch and the GPUs, run each scenario in its own process.

`--gpu 0,1,...` runs scenarios on several GPUs at once: one worker thread per GPU takes the next
scenario and runs its process on that GPU, so no two scenarios ever share a device (their
timings would disturb each other). Scenarios on different GPUs still share the host's memory
bandwidth, which is what their H2D copies use: time on one GPU when the numbers matter.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import offlint
from offlint.probing.bundled import bundled_target, select_bundled
from offlint.probing.checks import (
    GOOD_VERDICTS,
    GRAPH_SPEED,
    H2D_COPIES,
    Expectation,
    Thresholds,
    compare_overlap_with_inline,
    evaluate_scenario,
)
from offlint.probing.errors import ProbeUsageError
from offlint.probing.options import ProbeOptions, looks_like_module
from offlint.probing.spec import ScenarioSpec
from offlint.probing.target import MODULE_OFFLOADER, constructor_kwargs, load_target

SCHEMA = "offlint-probe/1"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class PlannedScenario:
    name: str
    target: str
    description: str
    expectation: Expectation | None


def plan(options: ProbeOptions) -> list[PlannedScenario]:
    """The scenarios to run, each TARGET loaded once here so that a bad one is exit 2 before
    any GPU work."""
    if options.target is not None:
        if options.scenarios:
            raise ProbeUsageError("--scenario selects bundled scenarios: give it without TARGET")
        planned = [PlannedScenario("target", absolute_target(options.target), "", None)]
    else:
        planned = [
            PlannedScenario(s.name, bundled_target(s), s.description, s.expectation)
            for s in select_bundled(options.scenarios)
        ]
    for scenario in planned:
        target = load_target(scenario.target, options.methods)
        # The constructor is checked with stand-ins for what the probe supplies at run time.
        stand_ins = (
            {
                "module": None,
                "alt_stream": None,
                "whitelist_param_names": None,
                "mode": "cpu",
                "resident_parameter_ids": set(),
            }
            if target.shape == MODULE_OFFLOADER
            else {"group_size": 1, "num_in_group": 1, "prefetch_step": 1, "mode": "cpu"}
        )
        constructor_kwargs(target.cls, stand_ins, dict(options.init_kwargs))
    return planned


def absolute_target(target: str) -> str:
    """A file TARGET made absolute, so the worker finds it wherever it runs."""
    if looks_like_module(target):
        return target
    head, sep, attr = target.partition(":")
    return str(Path(head).resolve()) + sep + attr


def check_gpus(gpus: tuple[int, ...]) -> None:
    """Exit 2, in one line, unless torch with CUDA sees every requested GPU."""
    try:
        import torch
    except ImportError:
        raise ProbeUsageError(
            "torch is not installed: offlint probe needs PyTorch with CUDA "
            "(pip install 'offlint[probe]')"
        ) from None
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for index in gpus:
        if index >= visible:
            why = "" if torch.version.cuda else f" (torch {torch.__version__} has no CUDA)"
            raise ProbeUsageError(f"no CUDA device {index}: {visible} visible{why}")


def _package_root() -> str:
    return str(Path(offlint.__file__).resolve().parent.parent)


def run_worker(spec: ScenarioSpec, timeout_s: float) -> dict[str, Any]:
    """Run one scenario in a fresh interpreter and return its result (or why there is none)."""
    with tempfile.TemporaryDirectory(prefix="offlint-probe-") as scratch:
        spec_path = Path(scratch) / "spec.json"
        result_path = Path(scratch) / "result.json"
        spec.write(spec_path)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_package_root(), *filter(None, [env.get("PYTHONPATH")])]
        )
        env["PYTHONUNBUFFERED"] = "1"
        command = [sys.executable, "-m", "offlint.probing.worker", str(spec_path), str(result_path)]
        try:
            completed = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            return {
                "scenario": spec.name,
                "target": spec.target,
                "worker_error": f"timed out after {timeout_s:g} s",
            }
        if result_path.is_file():
            try:
                result: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
                return result
            except (OSError, ValueError) as exc:
                return {
                    "scenario": spec.name,
                    "target": spec.target,
                    "worker_error": f"unreadable result: {exc}",
                }
        tail = (completed.stderr or completed.stdout or "").strip()[-3000:]
        return {
            "scenario": spec.name,
            "target": spec.target,
            "worker_error": f"worker exited with status {completed.returncode} and no "
            f"result\n{tail}",
        }


def run_on_gpus(
    specs: list[ScenarioSpec], gpus: tuple[int, ...], timeout_s: float, progress: Progress
) -> list[dict[str, Any]]:
    pending: queue.Queue[tuple[int, ScenarioSpec]] = queue.Queue()
    for index, spec in enumerate(specs):
        pending.put((index, spec))
    results: list[dict[str, Any] | None] = [None] * len(specs)

    def serve(gpu: int) -> None:
        while True:
            try:
                index, spec = pending.get_nowait()
            except queue.Empty:
                return
            placed = ScenarioSpec.from_json({**spec.to_json(), "device_index": gpu})
            progress(f"[gpu {gpu}] {spec.name}: running")
            started = time.perf_counter()
            results[index] = run_worker(placed, timeout_s)
            progress(f"[gpu {gpu}] {spec.name}: finished in {time.perf_counter() - started:.1f} s")

    threads = [threading.Thread(target=serve, args=(gpu,), daemon=True) for gpu in gpus]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [
        result
        if result is not None
        else {"scenario": spec.name, "target": spec.target, "worker_error": "never ran"}
        for result, spec in zip(results, specs, strict=True)
    ]


def judge(
    planned: list[PlannedScenario], raws: list[dict[str, Any]], options: ProbeOptions
) -> dict[str, Any]:
    """The run document: every scenario's measurements and evaluation, the comparisons, the
    exit code. Rendering (table or JSON) works from this alone."""
    thresholds = Thresholds(options.tolerance, options.max_graph_slowdown)
    switched_off = ([] if options.timing else [GRAPH_SPEED]) + (
        [] if options.profile else [H2D_COPIES]
    )
    scenarios = []
    for scenario, raw in zip(planned, raws, strict=True):
        expectation = scenario.expectation.without(switched_off) if scenario.expectation else None
        scenarios.append(
            {
                "name": scenario.name,
                "description": scenario.description,
                "expectation": expectation.to_json() if expectation else None,
                "raw": raw,
                "evaluation": evaluate_scenario(raw, thresholds, expectation),
            }
        )
    return finish_document(scenarios, options)


def rejudge(document: dict[str, Any]) -> dict[str, Any]:
    """A recorded run judged again by this version's checks, from its measurements and its own
    options and expectations; the date and environment stay the recording's."""
    options = ProbeOptions.from_json(document["options"])
    thresholds = Thresholds(options.tolerance, options.max_graph_slowdown)
    scenarios = []
    for scenario in document["scenarios"]:
        expectation = Expectation.from_json(scenario.get("expectation"))
        scenarios.append(
            {
                **scenario,
                "evaluation": evaluate_scenario(scenario["raw"], thresholds, expectation),
            }
        )
    judged = finish_document(scenarios, options)
    return {
        **document,
        "scenarios": scenarios,
        "comparisons": judged["comparisons"],
        "exit_code": judged["exit_code"],
    }


def finish_document(scenarios: list[dict[str, Any]], options: ProbeOptions) -> dict[str, Any]:
    by_name = {scenario["name"]: scenario for scenario in scenarios}
    comparisons = []
    if options.target is None and "overlap" in by_name and "inline" in by_name:
        comparison = compare_overlap_with_inline(
            by_name["overlap"], by_name["inline"], options.min_overlap_speedup
        )
        if comparison is not None:
            comparisons.append(comparison)
    good = all(s["evaluation"]["verdict"] in GOOD_VERDICTS for s in scenarios)
    good = good and all(c["passed"] is not False for c in comparisons)
    environment = next(
        (s["raw"]["environment"] for s in scenarios if s["raw"].get("environment")), None
    )
    return {
        "schema": SCHEMA,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "offlint_version": offlint.__version__,
        "options": options.to_json(),
        "environment": environment,
        "scenarios": scenarios,
        "comparisons": comparisons,
        "exit_code": 0 if good and scenarios else 1,
    }


def probe(options: ProbeOptions, progress: Progress) -> dict[str, Any]:
    planned = plan(options)
    check_gpus(options.gpus)
    specs = [ScenarioSpec.from_options(s.name, s.target, options) for s in planned]
    raws = run_on_gpus(specs, options.gpus, options.timeout_s, progress)
    return judge(planned, raws, options)
