"""Plan the scenarios, check torch and the GPUs, run each scenario in its own process.

`--gpu 0,1,...` runs scenarios on several GPUs at once: one worker thread per GPU takes the next
scenario and runs its process on that GPU, so no two scenarios ever share a device (their
timings would disturb each other). Scenarios on different GPUs still share the host's memory
bandwidth, which is what their H2D copies use: time on one GPU when the numbers matter.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import os
import queue
import re
import signal
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
from offlint.probing.errors import ProbeUsageError, is_user_file
from offlint.probing.options import ProbeOptions, looks_like_module
from offlint.probing.spec import ScenarioSpec

SCHEMA = "offlint-probe/1"
Progress = Callable[[str], None]


# A TARGET's import and construction (or an --entry's import) must finish within this, whatever
# --timeout allows the whole scenario: a hang at import is a setup error, not a long wait.
SETUP_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class PlannedScenario:
    name: str
    target: str
    description: str
    expectation: Expectation | None
    entry: bool = False


def plan(options: ProbeOptions) -> list[PlannedScenario]:
    """The scenarios to run. Nothing of the user's is imported here: the worker does that
    (validate), under a timeout."""
    if (options.target is not None or options.entry is not None) and options.scenarios:
        raise ProbeUsageError(
            "--scenario selects bundled scenarios: give it without TARGET or --entry"
        )
    if options.entry is not None:
        from offlint.probing.entry import resolve_entry_spec

        return [PlannedScenario("entry", resolve_entry_spec(options.entry), "", None, True)]
    if options.target is not None:
        return [PlannedScenario("target", absolute_target(options.target), "", None)]
    # A compiled or split-capture life cycle is measured, not judged: the expectations are
    # those of one whole capture of the eager forward.
    judged = not options.compiled and options.capture_mode == "whole"
    return [
        PlannedScenario(s.name, bundled_target(s), s.description, s.expectation if judged else None)
        for s in select_bundled(options.scenarios)
    ]


def absolute_target(target: str) -> str:
    """A file TARGET made absolute, so the worker finds it wherever it runs."""
    if looks_like_module(target):
        return target
    head, sep, attr = target.partition(":")
    return str(Path(head).resolve()) + sep + attr


def check_torch() -> None:
    """Exit 2, in one line naming the extra, when torch is not installed (found, not imported:
    the worker imports it)."""
    if importlib.util.find_spec("torch") is None:
        raise ProbeUsageError(
            "torch is not installed: offlint probe needs PyTorch with CUDA "
            "(pip install 'offlint[probe]')"
        )


def _package_root() -> str:
    return str(Path(offlint.__file__).resolve().parent.parent)


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_package_root(), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    # a crash in native code (a SIGSEGV in a compiled graph, a driver abort) prints the Python
    # stack it happened under: the only pointer to the user's line there is
    env["PYTHONFAULTHANDLER"] = "1"
    return env


_FAULT_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)', re.MULTILINE)


def _ended(status: int) -> str:
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-status).name}"
    return f"exited with status {status}"


def crash_site(stderr: str) -> str | None:
    """Where the worker's Python code was when a fatal signal hit it: the innermost frame of the
    user's code (not the standard library's, torch's or offlint's) in the current thread's stack
    as faulthandler prints it (most recent call first); else the innermost frame."""
    fatal = stderr.rfind("Fatal Python error:")
    current = stderr.find("Current thread", fatal)
    if fatal < 0 or current < 0:
        return None
    end = stderr.find("\n\n", current)  # the current thread's stack ends at a blank line
    frames = list(_FAULT_FRAME.finditer(stderr, current, end if end >= 0 else len(stderr)))
    if not frames:
        return None
    frame = next((f for f in frames if is_user_file(f["file"])), frames[0])
    return f"{frame['file']}:{frame['line']} in {frame['function']}"


class WorkerProcess:
    """One `python -m offlint.probing.worker --serve`, in its own process group (a timeout kills
    the group: whatever the scenario started goes with it)."""

    def __init__(self) -> None:
        self.scratch = tempfile.TemporaryDirectory(prefix="offlint-probe-")
        self.stderr = open(Path(self.scratch.name) / "stderr.txt", "w+b")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "offlint.probing.worker", "--serve"],
            env=_worker_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.count = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def stderr_text(self) -> str:
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace").strip()

    def stderr_tail(self) -> str:
        return self.stderr_text()[-3000:]

    def crashed_at(self) -> str | None:
        """The Python line a fatal signal hit the worker at, when it died of one."""
        return crash_site(self.stderr_text())

    def ask(
        self, command: str, payload: dict[str, Any], timeout_s: float, setup_timeout_s: float
    ) -> tuple[dict[str, Any] | None, str | None, str]:
        """(result, why there is none, the phase it was in)."""
        self.count += 1
        spec_path = Path(self.scratch.name) / f"spec-{self.count}.json"
        result_path = Path(self.scratch.name) / f"result-{self.count}.json"
        spec_path.write_text(json.dumps(payload), encoding="utf-8")
        phase = "setup"
        started = time.monotonic()
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(f"{command}\t{spec_path}\t{result_path}\n")
            self.process.stdin.flush()
        except OSError:
            return None, f"worker exited with status {self.process.poll()}", phase
        while True:
            limit = setup_timeout_s if phase == "setup" else timeout_s
            left = started + limit - time.monotonic()
            try:
                line = self.lines.get(timeout=max(left, 0.0))
            except queue.Empty:
                self.kill()
                where = f" in phase {phase}" if command == "run" else ""
                return None, f"timed out after {limit:g} s{where}", phase
            if line is None:
                status = self.process.wait()
                site = self.crashed_at()
                where = f" (at {site}: faulthandler's Python stack is in the worker's stderr)" if site else ""
                return None, f"worker {_ended(status)}{where} and no result", phase
            if line.startswith("offlint-phase "):
                phase = line.split(" ", 1)[1]
            elif line == "offlint-done":
                try:
                    result: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
                except (OSError, ValueError) as exc:
                    return None, f"unreadable result: {exc}", phase
                return result, None, phase

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                assert self.process.stdin is not None
                self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        # Anything the scenario left running in the group goes too.
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.stderr.close()
        self.scratch.cleanup()


def _spec_payload(spec: ScenarioSpec, gpus: tuple[int, ...] = ()) -> dict[str, Any]:
    return {**spec.to_json(), "gpus": list(gpus)}


def run_in(worker: WorkerProcess, spec: ScenarioSpec, timeout_s: float) -> dict[str, Any]:
    result, why, phase = worker.ask(
        "run", _spec_payload(spec), timeout_s, min(timeout_s, SETUP_TIMEOUT_S)
    )
    if result is not None:
        return result
    failed: dict[str, Any] = {"scenario": spec.name, "target": spec.target}
    tail = worker.stderr_tail()
    if worker.crashed_at() is not None:  # the crash's line last: it is what a report shows
        failed["worker_error"] = f"{tail}\n{why}"
    else:
        failed["worker_error"] = f"{why}\n{tail}" if tail and "timed out" not in (why or "") else why
    if phase == "setup" and why and why.startswith("timed out"):
        what = "--entry" if spec.entry else "TARGET"
        failed["setup_error"] = f"{what} {spec.target}: importing or building it {why}"
    return failed


def run_worker(spec: ScenarioSpec, timeout_s: float) -> dict[str, Any]:
    """Run one scenario in a fresh worker process and return its result (or why there is
    none)."""
    worker = WorkerProcess()
    try:
        return run_in(worker, spec, timeout_s)
    finally:
        worker.close()


def needs_fresh_process(result: dict[str, Any]) -> bool:
    """After a failed capture, an error or a crash, the next scenario gets a new process (its
    CUDA context may be poisoned); otherwise they share one."""
    capture = result.get("capture") or {}
    return bool(
        "worker_error" in result or result.get("phase_errors") or capture.get("ok") is False
    )


def validate_in(worker: WorkerProcess, spec: ScenarioSpec, gpus: tuple[int, ...]) -> None:
    result, why, _ = worker.ask(
        "validate", _spec_payload(spec, gpus), SETUP_TIMEOUT_S, SETUP_TIMEOUT_S
    )
    if result is None:
        what = "--entry" if spec.entry else "TARGET"
        if why and why.startswith("timed out"):
            raise ProbeUsageError(f"{what} {spec.target}: importing it {why}")
        tail = worker.stderr_tail().splitlines()
        detail = f": {tail[-1]}" if tail and worker.crashed_at() is None else ""
        raise ProbeUsageError(f"the probe's worker failed: {why}{detail}")
    if result.get("error"):
        raise ProbeUsageError(result["error"])


def run_on_gpus(
    specs: list[ScenarioSpec],
    gpus: tuple[int, ...],
    timeout_s: float,
    progress: Progress,
    first_worker: WorkerProcess | None = None,
) -> list[dict[str, Any]]:
    pending: queue.Queue[tuple[int, ScenarioSpec]] = queue.Queue()
    for index, spec in enumerate(specs):
        pending.put((index, spec))
    results: list[dict[str, Any] | None] = [None] * len(specs)
    handed = [first_worker]

    def serve(gpu: int) -> None:
        worker = handed.pop() if gpu == gpus[0] and handed else None
        try:
            while True:
                try:
                    index, spec = pending.get_nowait()
                except queue.Empty:
                    return
                placed = ScenarioSpec.from_json({**spec.to_json(), "device_index": gpu})
                progress(f"[gpu {gpu}] {spec.name}: running")
                started = time.perf_counter()
                if worker is None:
                    worker = WorkerProcess()
                result = run_in(worker, placed, timeout_s)
                results[index] = result
                if needs_fresh_process(result):
                    worker.close()
                    worker = None
                progress(
                    f"[gpu {gpu}] {spec.name}: finished in {time.perf_counter() - started:.1f} s"
                )
        finally:
            if worker is not None:
                worker.close()

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


def _fails_capture(scenario: PlannedScenario) -> bool:
    expectation = scenario.expectation
    return bool(expectation and expectation.checks.get("capture") == "fail")


def setup_error(raws: list[dict[str, Any]]) -> str | None:
    """The first scenario's setup error (the target could not be imported or built)."""
    for raw in raws:
        if raw.get("setup_error"):
            return str(raw["setup_error"])
        for entry in raw.get("phase_errors", []):
            if entry.get("setup_error"):
                return str(entry["setup_error"])
    return None


def probe(options: ProbeOptions, progress: Progress) -> dict[str, Any]:
    check_torch()
    planned = plan(options)
    specs = [ScenarioSpec.from_options(s.name, s.target, options, entry=s.entry) for s in planned]
    first = WorkerProcess()
    try:
        validate_in(first, specs[0], options.gpus)
    except BaseException:
        first.close()
        raise
    # Scenarios expected to fail their capture run last: until then every scenario shares one
    # process (a failed capture is followed by a fresh one).
    order = sorted(range(len(planned)), key=lambda i: _fails_capture(planned[i]))
    ordered = run_on_gpus(
        [specs[i] for i in order], options.gpus, options.timeout_s, progress, first
    )
    raws: list[dict[str, Any]] = [{}] * len(planned)
    for position, index in enumerate(order):
        raws[index] = ordered[position]
    if planned[0].expectation is None:
        error = setup_error(raws)
        if error is not None:
            raise ProbeUsageError(error)
    return judge(planned, raws, options)
