"""Judge a scenario's measurements: the checks, the derived timing, the verdict.

Pure Python on the worker's JSON, so a recorded run can be judged again anywhere (the CPU tests
do). A check's status is "pass", "fail" or "skip" (not reached or not applicable). A user
TARGET is expected to pass every check it reaches; a bundled scenario carries an expectation per
check (the broken original is expected to fail its capture with 905 at the root) and its
verdict says whether what happened matches.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from offlint.probing.cuda_errors import cuda_error_name

PASS, FAIL, SKIP = "pass", "fail", "skip"

EAGER = "eager"
CAPTURE = "capture"
REPLAY = "replay"
EAGER_AFTER_CAPTURE = "eager_after_capture"
WEIGHT_UPDATE = "weight_update"
H2D_COPIES = "h2d_copies"
GRAPH_SPEED = "graph_speed"

CHECK_LABELS = {
    EAGER: "eager forwards match the reference",
    CAPTURE: "every batch size captures",
    REPLAY: "replays match the reference",
    EAGER_AFTER_CAPTURE: "eager forwards after a capture match",
    WEIGHT_UPDATE: "replays after an in-place host weight update match",
    H2D_COPIES: "one H2D copy per offloaded weight per replay",
    GRAPH_SPEED: "graph step within the allowed slowdown of the eager step",
}
CHECK_ORDER = list(CHECK_LABELS)
# Phases that only measure the TARGET (their failures are not a check's): an error in one fails
# the verdict. The baseline runs no TARGET code (the all-on-GPU model, the H2D bandwidth): an
# error there leaves the derived times incomplete and is a warning.
_MEASUREMENT_PHASES = ("eager_timing", "graph_timing")
_BASELINE = "baseline"

# Verdicts
VERDICT_PASS = "pass"  # user target: every check passed
VERDICT_FAIL = "fail"  # user target: a check failed
VERDICT_EXPECTED = "as expected"  # bundled: every expectation met
VERDICT_UNEXPECTED = "unexpected"  # bundled: an expectation missed
VERDICT_ERROR = "error"  # the worker crashed or the run could not start
GOOD_VERDICTS = (VERDICT_PASS, VERDICT_EXPECTED)


@dataclass(frozen=True)
class Expectation:
    """What a bundled scenario is expected to do: check name → "pass"/"fail" (checks left out
    may do either), and the root CUDA error number its capture must fail with, if it must."""

    checks: dict[str, str] = field(default_factory=dict)
    capture_root_error: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"checks": dict(self.checks), "capture_root_error": self.capture_root_error}

    def without(self, names: Iterable[str]) -> Expectation:
        """The same expectation with no opinion on `names` (checks the run switched off)."""
        dropped = set(names)
        return Expectation(
            {k: v for k, v in self.checks.items() if k not in dropped}, self.capture_root_error
        )

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Expectation | None:
        if data is None:
            return None
        return cls(dict(data.get("checks", {})), data.get("capture_root_error"))


@dataclass(frozen=True)
class Thresholds:
    tolerance: float = 2e-2
    max_graph_slowdown: float = 1.1


def _fmt_err(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "not finite"
    if value == 0.0:
        return "exact"
    return f"rel err {value:.2e}" if value < 1e-2 else f"rel err {value:.3f}"


def _phase_error(raw: dict[str, Any], phase: str) -> str | None:
    for entry in raw.get("phase_errors", []):
        if entry.get("phase") == phase:
            root = entry.get("root", {})
            code = root.get("cuda_code")
            text = f"{code} {root.get('cuda_name')}" if code is not None else root.get("type", "")
            message = root.get("message", "")
            return f"raised {text}: {message}".strip()
    return None


def _numeric_check(
    raw: dict[str, Any], step_phase: str, error_phases: Iterable[str], tolerance: float
) -> tuple[str, str, float | None]:
    steps = [step for step in raw.get("steps", []) if step["phase"] == step_phase]
    for phase in error_phases:
        error = _phase_error(raw, phase)
        if error is not None:
            return FAIL, error, None
    if not steps:
        return SKIP, "not reached", None
    worst = max(steps, key=lambda s: math.inf if s["rel_err"] is None else s["rel_err"])
    worst_err = math.inf if worst["rel_err"] is None else worst["rel_err"]
    failing = [s for s in steps if s["rel_err"] is None or s["rel_err"] > tolerance]
    exact = sum(1 for s in steps if s.get("exact"))
    if failing:
        first = failing[0]
        detail = (
            f"{len(failing)} of {len(steps)} wrong; {_fmt_err(first['rel_err'])} at batch "
            f"{first['batch']} ({first['note']})"
        )
        return FAIL, detail, worst_err
    detail = (
        f"{len(steps)} of {len(steps)} exact"
        if exact == len(steps)
        else f"{len(steps)} within tolerance, worst {_fmt_err(worst_err)}"
    )
    return PASS, detail, worst_err


def describe_capture_error(error: dict[str, Any]) -> str:
    root = error.get("root", {})
    code = root.get("cuda_code")
    name = root.get("cuda_name") or (cuda_error_name(code) if code is not None else None)
    text = f"{code} {name}" if code is not None else f"{root.get('type')}: {root.get('message')}"
    chain = error.get("chain", [])
    if len(chain) > 1 and chain[0].get("cuda_code") is not None and chain[0] != root:
        text += f" (surfaced as {chain[0]['cuda_code']} {chain[0]['cuda_name']})"
    source = error.get("source")
    if source:
        text += f" at {source['file']}:{source['line']} in {source['function']}: {source['code']}"
    hazard = error.get("hazard")
    if hazard:
        text += f"; {describe_hazard(hazard)}"
    return text


def describe_hazard(hazard: dict[str, Any]) -> str:
    """The sanitizer's account of a call, in a line: rule, the call's line, the other line."""
    here = (hazard.get("here") or [None])[0]
    text = f"the sanitizer saw {hazard['rule']} {hazard['name']}: {hazard['what']}"
    if here:
        text += f" at {here['file']}:{here['line']} ({here['code']})"
    other = (hazard.get("other") or [None])[0]
    if other and hazard.get("other_label"):
        text += f"; {hazard['other_label']}: {other['file']}:{other['line']} ({other['code']})"
    return text


def _capture_check(raw: dict[str, Any]) -> tuple[str, str, int | None]:
    capture = raw.get("capture")
    if capture is None:
        error = _phase_error(raw, CAPTURE)
        return (FAIL, error, None) if error else (SKIP, "not reached", None)
    if capture.get("ok"):
        batches = ", ".join(str(g["batch"]) for g in capture.get("graphs", []))
        return PASS, f"batch {batches} captured into one shared pool", None
    error = capture.get("error")
    if error is None:
        return FAIL, _phase_error(raw, CAPTURE) or "capture failed", None
    detail = f"batch {error.get('batch')}: {describe_capture_error(error)}"
    return FAIL, detail, error.get("root", {}).get("cuda_code")


def _expected_copies(raw: dict[str, Any]) -> int:
    """An --entry's own `expected_copies`, else one copy per host weight, else (an --entry
    whose host copies are not its parameters) as many as an eager step makes."""
    if raw.get("expected_copies") is not None:
        return int(raw["expected_copies"])
    host = len(raw.get("host_weights", []))
    if host == 0 and raw.get("entry"):
        per_eager = (raw.get("h2d") or {}).get("per_eager_step") or {}
        if per_eager:
            return round(next(iter(per_eager.values()))["copies"])
    return host


def _h2d_check(raw: dict[str, Any]) -> tuple[str, str]:
    per_replay = (raw.get("h2d") or {}).get("per_replay") or {}
    if not per_replay:
        error = _phase_error(raw, "graph_timing")
        return (FAIL, error) if error else (SKIP, "not measured")
    expected = _expected_copies(raw)
    per_eager = (raw.get("h2d") or {}).get("per_eager_step") or {}
    eager_text = ""
    if per_eager:
        eager_copies = next(iter(per_eager.values()))["copies"]
        eager_text = f", {eager_copies:g} per eager step"
    if expected == 0:
        return FAIL, "no offloaded weight lives in host memory: nothing was offloaded"
    wrong = {batch: m for batch, m in per_replay.items() if m["copies"] != expected}
    sample_batch, sample = next(iter((wrong or per_replay).items()))
    mib = sample["bytes"] / 2**20
    detail = (
        f"{sample['copies']:g} copies ({mib:.0f} MiB) per replay at batch {sample_batch}"
        f"{eager_text}; expected {expected}"
    )
    pageable = [kind for kind in sample.get("kinds", {}) if "Pageable" in kind]
    if pageable:
        detail += "; pageable host memory copied"
    return (FAIL if wrong or pageable else PASS), detail


def derived_timing(raw: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per batch size: compute (the all-on-GPU graph), H2D per step at the measured bandwidth,
    ideal = max of the two, serial = their sum, the inline-H2D cost (graph − ideal) and the
    share of the possible overlap the graph keeps ((serial − graph) / (serial − ideal))."""
    timing = raw.get("timing") or {}
    h2d = timing.get("h2d") or {}
    bandwidth = h2d.get("gb_per_s")
    step_bytes = sum(w.get("bytes", 0) for w in raw.get("host_weights", []))
    derived: dict[str, dict[str, float | None]] = {}
    for batch in (str(b) for b in raw.get("model", {}).get("batch_sizes", [])):

        def median(kind: str, batch: str = batch) -> float | None:
            entry = (timing.get(kind) or {}).get(batch)
            return entry["median_ms"] if entry else None

        compute = median("reference_graph")
        eager = median("eager")
        graph = median("graph")
        h2d_ms = step_bytes / (bandwidth * 1e9) * 1e3 if bandwidth else None
        ideal = max(compute, h2d_ms) if compute is not None and h2d_ms is not None else None
        serial = compute + h2d_ms if compute is not None and h2d_ms is not None else None
        row: dict[str, float | None] = {
            "compute_ms": compute,
            "h2d_ms": h2d_ms,
            "ideal_ms": ideal,
            "serial_ms": serial,
            "eager_ms": eager,
            "graph_ms": graph,
            "graph_over_eager": graph / eager if graph and eager else None,
            "graph_over_ideal": graph / ideal if graph and ideal else None,
            "eager_over_ideal": eager / ideal if eager and ideal else None,
            "inline_cost_ms": graph - ideal if graph is not None and ideal is not None else None,
            "overlap_kept": (
                (serial - graph) / (serial - ideal)
                if graph is not None and serial is not None and ideal is not None and serial > ideal
                else None
            ),
            "serial_over_ideal": serial / ideal if serial and ideal else None,
        }
        derived[batch] = row
    return derived


def _speed_check(
    derived: dict[str, dict[str, float | None]], raw: dict[str, Any], limit: float
) -> tuple[str, str]:
    batches = [str(b) for b in raw.get("model", {}).get("batch_sizes", [])]
    if not batches or derived.get(batches[0], {}).get("graph_over_eager") is None:
        return SKIP, "not timed"
    row = derived[batches[0]]
    ratio = row["graph_over_eager"]
    assert ratio is not None
    detail = (
        f"graph {row['graph_ms']:.2f} ms vs eager {row['eager_ms']:.2f} ms at batch "
        f"{batches[0]}: {ratio:.2f}x (limit {limit:g}x)"
    )
    return (PASS if ratio <= limit else FAIL), detail


def evaluate_scenario(
    raw: dict[str, Any], thresholds: Thresholds, expectation: Expectation | None
) -> dict[str, Any]:
    if "worker_error" in raw or _phase_error(raw, "setup") or _phase_error(raw, "attach"):
        why = raw.get("worker_error") or _phase_error(raw, "setup") or _phase_error(raw, "attach")
        last = str(why).strip().splitlines()[-1] if why else "unknown"
        return {"checks": [], "derived": {}, "verdict": VERDICT_ERROR, "problems": [last]}

    tolerance = thresholds.tolerance
    results: dict[str, tuple[str, str]] = {}
    status, detail, _ = _numeric_check(raw, "eager", ["eager"], tolerance)
    results[EAGER] = (status, detail)
    capture_status, capture_detail, root_code = _capture_check(raw)
    results[CAPTURE] = (capture_status, capture_detail)
    status, detail, _ = _numeric_check(raw, "replay", ["replay"], tolerance)
    results[REPLAY] = (status, detail)
    status, detail, _ = _numeric_check(
        raw, "eager_after_capture", ["eager_after_capture"], tolerance
    )
    results[EAGER_AFTER_CAPTURE] = (status, detail)
    update = raw.get("weight_update") or {}
    if update and not update.get("applied", True):
        results[WEIGHT_UPDATE] = (SKIP, f"not applicable: {update.get('why')}")
    else:
        status, detail, _ = _numeric_check(raw, "replay_after_update", ["weight_update"], tolerance)
        results[WEIGHT_UPDATE] = (status, detail)
    results[H2D_COPIES] = _h2d_check(raw)
    derived = derived_timing(raw)
    results[GRAPH_SPEED] = _speed_check(derived, raw, thresholds.max_graph_slowdown)

    checks = []
    problems: list[str] = []
    for name in CHECK_ORDER:
        status, detail = results[name]
        expected = expectation.checks.get(name) if expectation else None
        entry: dict[str, Any] = {
            "name": name,
            "label": CHECK_LABELS[name],
            "status": status,
            "detail": detail,
            "expected": expected,
        }
        if expectation is None:
            entry["matches"] = status != FAIL
            if status == FAIL:
                problems.append(f"{name}: {detail}")
        elif expected is None:
            entry["matches"] = True
        else:
            entry["matches"] = status == expected
            if name == CAPTURE and expected == FAIL and status == FAIL:
                wanted = expectation.capture_root_error
                if wanted is not None and root_code != wanted:
                    entry["matches"] = False
                    got = "no CUDA error" if root_code is None else f"{root_code}"
                    problems.append(
                        f"capture: expected root {wanted} {cuda_error_name(wanted)}, got {got}"
                    )
                    checks.append(entry)
                    continue
            if not entry["matches"]:
                problems.append(f"{name}: expected {expected}, got {status} ({detail})")
        checks.append(entry)

    # A measurement that raised leaves numbers missing that the verdict would rest on.
    for phase in _MEASUREMENT_PHASES:
        error = _phase_error(raw, phase)
        if error is not None:
            problems.append(f"{phase}: {error}")

    warnings = []
    baseline_error = _phase_error(raw, _BASELINE)
    if baseline_error is not None:
        warnings.append(f"{_BASELINE}: {baseline_error} (compute and H2D references incomplete)")

    if expectation is None:
        verdict = VERDICT_FAIL if problems else VERDICT_PASS
    else:
        verdict = VERDICT_UNEXPECTED if problems else VERDICT_EXPECTED
    return {
        "checks": checks,
        "derived": derived,
        "verdict": verdict,
        "problems": problems,
        "warnings": warnings,
    }


def compare_overlap_with_inline(
    overlap: dict[str, Any], inline: dict[str, Any], min_speedup: float
) -> dict[str, Any] | None:
    """How much faster the overlap fix's graph step is than the inline fix's, at the first batch
    size. Gated unless the configuration makes that speedup impossible: when the measured
    serial/ideal (the most that overlapping copies with compute can win) is under the bar."""
    batches = [str(b) for b in overlap["raw"].get("model", {}).get("batch_sizes", [])]
    if not batches:
        return None
    batch = batches[0]
    fast = overlap["evaluation"]["derived"].get(batch, {})
    slow = inline["evaluation"]["derived"].get(batch, {})
    if not fast.get("graph_ms") or not slow.get("graph_ms"):
        return None
    speedup = slow["graph_ms"] / fast["graph_ms"]
    possible = fast.get("serial_over_ideal")
    # Unknown (no baseline) is gated: only a measured serial/ideal below the bar excuses it.
    gated = possible is None or possible >= min_speedup
    return {
        "name": f"{overlap['name']} vs {inline['name']}",
        "batch": int(batch),
        "speedup": speedup,
        "bar": min_speedup,
        "possible": possible,
        "gated": gated,
        "passed": speedup >= min_speedup if gated else None,
        "detail": (
            f"graph step {fast['graph_ms']:.2f} ms vs {slow['graph_ms']:.2f} ms: {speedup:.2f}x "
            + (
                f"(bar {min_speedup:g}x)"
                if gated
                else f"(not gated: serial/ideal {possible or 0:.2f}x < {min_speedup:g}x in this "
                "configuration)"
            )
        ),
    }
