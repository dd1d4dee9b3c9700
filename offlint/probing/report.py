"""Render a probe run document: rich tables for people, JSON for CI.

Both work from the document alone (runner.judge's output, or a recorded JSON file), so a run
recorded on a GPU machine renders the same anywhere.
"""

from __future__ import annotations

import json
import math
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from offlint.probing.checks import (
    CAPTURE,
    EAGER,
    EAGER_AFTER_CAPTURE,
    FAIL,
    GOOD_VERDICTS,
    GRAPH_SPEED,
    H2D_COPIES,
    PASS,
    REPLAY,
    WEIGHT_UPDATE,
    describe_capture_error,
    describe_hazard,
)

_COLUMNS = [
    (CAPTURE, "capture"),
    (EAGER, "eager"),
    (REPLAY, "replays"),
    (EAGER_AFTER_CAPTURE, "eager after\ncapture"),
    (WEIGHT_UPDATE, "weight\nupdate"),
    (H2D_COPIES, "H2D copies per replay\n(measured / expected)"),
    (GRAPH_SPEED, "graph /\neager"),
]
_STEP_PHASE = {
    EAGER: "eager",
    REPLAY: "replay",
    EAGER_AFTER_CAPTURE: "eager_after_capture",
    WEIGHT_UPDATE: "replay_after_update",
}


def render_json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2)


def _first_batch(raw: dict[str, Any]) -> str | None:
    batches = raw.get("model", {}).get("batch_sizes", [])
    return str(batches[0]) if batches else None


def _short_value(name: str, raw: dict[str, Any], evaluation: dict[str, Any]) -> str:
    """The number that goes with a check's mark in the table."""
    if name == CAPTURE:
        error = (raw.get("capture") or {}).get("error")
        if error:
            code = error.get("root", {}).get("cuda_code")
            return str(code) if code is not None else error.get("root", {}).get("type", "")
        return ""
    if name in _STEP_PHASE:
        errors = [s["rel_err"] for s in raw.get("steps", []) if s["phase"] == _STEP_PHASE[name]]
        if not errors:
            return ""
        worst = math.inf if any(e is None for e in errors) else max(errors)
        if worst == 0.0:
            return "exact"
        if not math.isfinite(worst):
            return "inf"
        return f"{worst:.2f}" if worst >= 0.01 else f"{worst:.1e}"
    if name == H2D_COPIES:
        per_replay = (raw.get("h2d") or {}).get("per_replay") or {}
        batch = _first_batch(raw)
        if batch in per_replay:
            measured = per_replay[batch]
            expected = raw.get("expected_copies")
            if expected is None:
                expected = len(raw.get("host_weights", []))
            return f"{measured['copies']:g} / {expected} ({measured['bytes'] / 2**20:.0f} MiB)"
        return ""
    if name == GRAPH_SPEED:
        batch = _first_batch(raw)
        ratio = evaluation.get("derived", {}).get(batch or "", {}).get("graph_over_eager")
        return f"{ratio:.2f}x" if ratio else ""
    return ""


def _cell(check: dict[str, Any], short: str) -> Text:
    status, expected = check["status"], check.get("expected")
    if status == PASS:
        mark, style = "✓", "green"
    elif status == FAIL:
        mark, style = "✗", "yellow" if expected == FAIL and check["matches"] else "red"
    else:
        mark, style = "–", "dim"
    if not check["matches"]:
        style = "bold red"
    text = Text(mark, style=style)
    if short:
        text.append(f" {short}", style=style)
    if status == FAIL and expected == FAIL and check["matches"]:
        text.append(" (expected)", style="dim")
    return text


def _verdict_text(verdict: str) -> Text:
    return Text(verdict, style="green" if verdict in GOOD_VERDICTS else "bold red")


def checks_table(document: dict[str, Any]) -> Table:
    table = Table(title="offlint probe: checks", title_justify="left", show_lines=False)
    table.add_column("scenario", no_wrap=True)
    for _, header in _COLUMNS:
        table.add_column(header, justify="center")
    table.add_column("verdict", no_wrap=True)
    for scenario in document["scenarios"]:
        raw, evaluation = scenario["raw"], scenario["evaluation"]
        by_name = {check["name"]: check for check in evaluation["checks"]}
        cells = []
        for name, _ in _COLUMNS:
            check = by_name.get(name)
            cells.append(
                _cell(check, _short_value(name, raw, evaluation))
                if check
                else Text("–", style="dim")
            )
        table.add_row(scenario["name"], *cells, _verdict_text(evaluation["verdict"]))
    return table


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def timing_table(document: dict[str, Any]) -> Table | None:
    rows = []
    for scenario in document["scenarios"]:
        derived = scenario["evaluation"].get("derived") or {}
        for batch, row in derived.items():
            if row.get("eager_ms") is None and row.get("graph_ms") is None:
                continue
            rows.append((scenario, batch, row))
    if not rows:
        return None
    table = Table(title="time per step, ms (CUDA events, median)", title_justify="left")
    for header in (
        "scenario",
        "batch",
        "eager\n(overlap)",
        "graph\nreplay",
        "all-on-GPU\ngraph",
        "H2D\nper step",
        "ideal\nmax(c, h)",
        "serial\nc + h",
        "graph −\nideal",
        "overlap\nkept",
        "graph /\neager",
    ):
        table.add_column(header, justify="right" if header not in ("scenario",) else "left")
    for scenario, batch, row in rows:
        kept = row.get("overlap_kept")
        ratio = row.get("graph_over_eager")
        table.add_row(
            scenario["name"],
            batch,
            _ms(row.get("eager_ms")),
            _ms(row.get("graph_ms")),
            _ms(row.get("compute_ms")),
            _ms(row.get("h2d_ms")),
            _ms(row.get("ideal_ms")),
            _ms(row.get("serial_ms")),
            _ms(row.get("inline_cost_ms")),
            "–" if kept is None else f"{kept:.0%}",
            "–" if ratio is None else f"{ratio:.2f}x",
        )
    return table


def _bandwidth_line(document: dict[str, Any]) -> str | None:
    for scenario in document["scenarios"]:
        h2d = ((scenario["raw"].get("timing") or {}).get("h2d")) or {}
        if h2d.get("gb_per_s"):
            mib = h2d["bytes"] / 2**20
            return (
                f"measured pinned H2D bandwidth: {h2d['gb_per_s']:.1f} GB/s "
                f"({mib:.0f} MiB in {h2d['copy_ms']:.3f} ms)"
            )
    return None


def detail_lines(scenario: dict[str, Any]) -> list[Text]:
    raw, evaluation = scenario["raw"], scenario["evaluation"]
    lines: list[Text] = []
    head = Text(f"{scenario['name']}", style="bold")
    if scenario.get("description"):
        head.append(f" — {scenario['description']}", style="dim")
    lines.append(head)
    target = raw.get("target_class") or raw.get("target")
    if target:
        lines.append(Text(f"  target: {target} ({raw.get('target_shape', '?')})"))
    error = (raw.get("capture") or {}).get("error")
    if error:
        lines.append(
            Text(
                f"  capture failed at batch {error.get('batch')}: root "
                f"{describe_capture_error(error)}",
                style="yellow",
            )
        )
    for problem in evaluation.get("problems", []):
        lines.append(Text(f"  ✗ {problem}", style="red"))
    for warning in evaluation.get("warnings", []):
        lines.append(Text(f"  ! {warning}", style="yellow"))
    capture_hazard = (error or {}).get("hazard")
    for hazard in raw.get("hazards", []):
        same = capture_hazard and hazard.get("here") == capture_hazard.get("here")
        if not same:
            lines.append(
                Text(f"  ! in {hazard.get('phase')}: {describe_hazard(hazard)}", style="yellow")
            )
    host = raw.get("host_weights") or []
    pageable = [w for w in host if w.get("device") == "cpu" and not w.get("pinned")]
    if pageable:
        lines.append(
            Text(
                f"  ! {len(pageable)} of {len(host)} host weights are pageable (not pinned): "
                "a capture cannot copy them (OFL106), and eager copies from them are synchronous",
                style="yellow",
            )
        )
    compiled = raw.get("compiled")
    if compiled:
        lines.append(compiled_line(compiled))
    compile_result = raw.get("compile")
    if compile_result:
        lines.append(compile_line(compile_result))
    # Every other phase's error already shows as a failed check, a problem or a warning.
    for entry in raw.get("phase_errors", []):
        if entry.get("phase") == "compile":
            root = entry.get("root", {})
            message = f"{root.get('type')}: {root.get('message')}"
            lines.append(Text(f"  torch.compile check could not run: {message}", style="dim"))
    return lines


def compiled_line(info: dict[str, Any]) -> Text:
    """`--compiled`: how the forward ran, from Dynamo's own counters."""
    how = (
        "torch.compile(fullgraph=True), captured by hand"
        if info.get("mode") == "fullgraph"
        else "torch.compile(mode='reduce-overhead')"
    )
    text = f"  compiled life cycle, {how}: {info.get('ran', 'did not finish')}"
    error = info.get("error")
    if error:
        text += f" ({error.get('reason')}"
        source = error.get("source")
        if source:
            text += f", at {source['file']}:{source['line']}: {source['code']}"
        text += ")"
    reasons = info.get("break_reasons") or {}
    if reasons:
        first = next(iter(reasons)).splitlines()[0][:160]
        text += f"; most frequent break: {first}"
    style = "yellow" if info.get("fell_back") or info.get("graph_breaks") else ""
    return Text(text, style=style)


def compile_line(result: dict[str, Any]) -> Text:
    """What the torch.compile check means for someone whose engine compiles before capturing."""
    if result.get("ok"):
        return Text(
            "  torch.compile(fullgraph=True): the offloaded forward traces as one graph, so an "
            "engine that compiles before it captures keeps it compiled"
        )
    text = (
        "  torch.compile(fullgraph=True) cannot trace the offloaded forward "
        f"({result.get('reason')}"
    )
    source = result.get("source")
    if source:
        text += f", at {source['file']}:{source['line']}: {source['code']}"
    text += (
        "): not a capture failure: an engine that compiles with fullgraph=True fails there, "
        "and without it the forward is split at that line (a graph break) and runs partly "
        "eager; OFL301 names the usual cause"
    )
    return Text(text, style="yellow")


def summary_line(document: dict[str, Any]) -> str:
    scenarios = document["scenarios"]
    good = sum(1 for s in scenarios if s["evaluation"]["verdict"] in GOOD_VERDICTS)
    env = document.get("environment") or {}
    where = (
        f" on {env.get('gpu_name')} (torch {env.get('torch')}, CUDA {env.get('cuda')}, "
        f"driver {env.get('driver')})"
        if env
        else ""
    )
    bundled = any(s.get("expectation") is not None for s in scenarios)
    what = "as expected" if bundled else "passed"
    return (
        f"offlint probe: {good} of {len(scenarios)} scenarios {what}{where}; "
        f"exit {document['exit_code']}"
    )


def render_console(document: dict[str, Any], console: Console) -> None:
    console.print(checks_table(document))
    timing = timing_table(document)
    if timing is not None:
        console.print(timing)
    bandwidth = _bandwidth_line(document)
    if bandwidth:
        console.print(bandwidth)
    for comparison in document.get("comparisons", []):
        passed = comparison.get("passed")
        style = "green" if passed else ("red" if passed is False else "dim")
        console.print(
            Text(
                f"{comparison['name']} at batch {comparison['batch']}: {comparison['detail']}",
                style=style,
            )
        )
    console.print()
    for scenario in document["scenarios"]:
        for line in detail_lines(scenario):
            console.print(line)
    console.print()
    console.print(summary_line(document))
