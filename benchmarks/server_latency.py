"""`offlint server`'s latency on an edited 2 000-line file, against a cold `offlint check` of it.

    .venv/bin/python -m benchmarks.server_latency [--edits 40] [--cold 5]

The file: SGLang's offloader before its fix (fixtures/sglang_offloader_original.py: OFL101 and
OFL103 at medium) followed by renamed copies of fixtures/lookalikes_clean.py (streams, events and
look-alike calls, no findings) up to 2 000 lines, in a fresh workspace folder with a
`[tool.offlint]` table.

- cold CLI: `python -m offlint check --no-cache FILE` in a new process (imports, parse,
  analysis, fix confirmation), the median of `--cold` runs;
- the server: `python -m offlint server` driven by pygls's client over stdio. After the file is
  opened and its first project run is done (warm: imports paid, the worker process up), each
  edit is one incremental `didChange` (a line inserted or removed, alternately) and its latency
  is the wall time from sending it to receiving the `publishDiagnostics` for that version (the
  module stays valid, its findings the same: the run stops otherwise), with
  the server's defaults (10 ms debounce). Edits are sequential: the next is sent when the last
  one's diagnostics arrived.

Prints the latencies and the ratio cold CLI / warm edit; writes the record to
benchmarks/results/server-latency-<UTC time>.json. The target (issue 35): within 200 ms warm.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
LINES = 2000


def build_file(lines: int = LINES) -> str:
    """The offloader (its two findings) and renamed copies of a clean look-alike module."""
    offloader = (REPO / "fixtures" / "sglang_offloader_original.py").read_text(encoding="utf-8").rstrip("\n")
    filler = (REPO / "fixtures" / "lookalikes_clean.py").read_text(encoding="utf-8")
    tree = ast.parse(filler)
    body_start = next(
        node.lineno for node in tree.body if not isinstance(node, (ast.Expr, ast.Import, ast.ImportFrom))
    )
    filler_lines = filler.splitlines()
    imports = [
        line for line in filler_lines[: body_start - 1] if line.startswith(("import ", "from ")) and "__future__" not in line
    ]
    rest = "\n".join(filler_lines[body_start - 1 :])
    names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    parts = [offloader, "\n".join(imports)]
    copy = 0
    while sum(part.count("\n") + 1 for part in parts) < lines:
        parts.append(pattern.sub(lambda m, i=copy: f"{m.group(1)}_{i}", rest))
        copy += 1
    text = "\n\n".join(parts)
    return "\n".join(text.splitlines()[:lines]) + "\n"


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["OFFLINT_CACHE_DIR"] = str(cache)
    return env


def cold_check(path: Path, runs: int, env: dict[str, str]) -> tuple[list[float], str]:
    times = []
    output = ""
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "offlint", "check", "--no-cache", "--output-format", "concise", str(path)],
            capture_output=True, text=True, cwd=path.parent, env=env, check=False,
        )
        times.append(time.perf_counter() - started)
        output = done.stdout
    return times, output


async def server_edits(path: Path, edits: int, env: dict[str, str]) -> dict[str, Any]:
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient
    from pygls.uris import from_fs_path

    client = LanguageClient("offlint-latency-benchmark", "1")
    received: dict[int, tuple[float, list[str]]] = {}  # version -> its first publication
    publications: dict[int, int] = {}
    arrived = asyncio.Event()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        if params.version is not None:
            publications[params.version] = publications.get(params.version, 0) + 1
            if params.version not in received:
                received[params.version] = (time.perf_counter(), sorted(str(d.code) for d in params.diagnostics))
        arrived.set()

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        return None

    await client.start_io(sys.executable, "-m", "offlint", "server", env=env)
    uri = from_fs_path(str(path)) or ""
    root = from_fs_path(str(path.parent)) or ""
    started = time.perf_counter()
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=root,
            workspace_folders=[types.WorkspaceFolder(uri=root, name="bench")],
        )
    )
    client.initialized(types.InitializedParams())
    text = path.read_text(encoding="utf-8")
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )

    async def until(version: int, timeout: float = 120.0) -> tuple[float, list[str]]:
        deadline = time.perf_counter() + timeout
        while version not in received:
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), max(0.01, deadline - time.perf_counter()))
        return received[version]

    first_at, first_codes = await until(1)
    first = first_at - started
    # warm: the project run (the worker process started, fixes confirmed) publishes version 1
    # a second time; edits start after it, so that none of them waits for it
    deadline = time.perf_counter() + 300
    while publications.get(1, 0) < 2 and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
    project_run = time.perf_counter() - started
    latencies = []
    codes_seen = set()
    # before the first top-level class: a statement of its own there keeps the module valid (an
    # edit that breaks the syntax is reported at once, and would flatter the latency)
    insert_at = next(i for i, line in enumerate(text.splitlines()) if line.startswith("class "))
    for index in range(edits):
        version = index + 2
        if index % 2 == 0:
            change = types.TextDocumentContentChangePartial(
                range=types.Range(start=types.Position(insert_at, 0), end=types.Position(insert_at, 0)),
                text=f"_edited_{index} = {index}\n",
            )
        else:
            change = types.TextDocumentContentChangePartial(
                range=types.Range(start=types.Position(insert_at, 0), end=types.Position(insert_at + 1, 0)),
                text="",
            )
        sent = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[change],
            )
        )
        at, codes = await until(version)
        latencies.append(at - sent)
        codes_seen.add(tuple(codes))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {
        "first_diagnostics_s": first,
        "first_codes": first_codes,
        "project_run_done_s": project_run,
        "edit_latencies_s": latencies,
        "codes_after_edits": sorted(list(c) for c in codes_seen),
    }


def analysis_only(text: str, runs: int) -> tuple[list[float], dict[str, float]]:
    """The same edits' analysis in this process, without the server: `check_buffer` (what the
    fast pass runs) on each edited text, imports and a first run paid before."""
    from offlint.config import Config, SelectionOverrides
    from offlint.pipeline import editor
    from offlint.pipeline.check import settings_for

    settings = settings_for(Config(root=REPO), SelectionOverrides(), None)
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("class "))
    editor.check_buffer(text, "offloader_2000.py", settings)
    times = []
    stages: dict[str, list[float]] = {}
    for index in range(runs):
        edited = "".join([*lines[:at], f"_edited_{index} = {index}\n", *lines[at:]])
        started = time.perf_counter()
        report = editor.check_buffer(edited, "offloader_2000.py", settings)
        times.append(time.perf_counter() - started)
        rules = sum(v for k, v in report.timings.items() if k.startswith("rule "))
        for stage, seconds in [*((k, v) for k, v in report.timings.items() if not k.startswith("rule ")), ("rules", rules)]:
            stages.setdefault(stage, []).append(seconds)
    return times, {stage: statistics.median(values) for stage, values in stages.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--cold", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="offlint-latency-") as folder:
        workspace = Path(folder) / "ws"
        workspace.mkdir()
        (workspace / "pyproject.toml").write_text("[tool.offlint]\n", encoding="utf-8")
        path = workspace / "offloader_2000.py"
        path.write_text(build_file(), encoding="utf-8")
        env = _env(Path(folder) / "cache")
        cold, cold_output = cold_check(path, args.cold, env)
        served = asyncio.run(server_edits(path, args.edits, env))
        alone, stages = analysis_only(path.read_text(encoding="utf-8"), max(5, args.edits // 2))
    edits = served["edit_latencies_s"]
    if served["codes_after_edits"] != [sorted(served["first_codes"])]:
        sys.exit(f"the edits changed the findings ({served['codes_after_edits']}): not the latency of a valid edit")
    cold_median = statistics.median(cold)
    edit_median = statistics.median(edits)
    edit_p90 = sorted(edits)[max(0, int(len(edits) * 0.9) - 1)]
    record = {
        "benchmark": "server_latency",
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average": os.getloadavg()},
        "commit": subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO, check=False
        ).stdout.strip(),
        "command": "python -m benchmarks.server_latency " + " ".join(sys.argv[1:]),
        "file_lines": LINES,
        "cold_check_s": cold,
        "cold_check_median_s": cold_median,
        "cold_check_findings": [line.split()[1] for line in cold_output.splitlines() if ": OFL" in line],
        **served,
        "edit_median_s": edit_median,
        "edit_p90_s": edit_p90,
        "edit_max_s": max(edits),
        "ratio_cold_check_over_edit": cold_median / edit_median,
        "analysis_only_s": alone,
        "analysis_only_median_s": statistics.median(alone),
        "analysis_stage_medians_s": stages,
        "target_s": 0.2,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"server-latency-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"file: {LINES} lines; findings {record['cold_check_findings']} (cold CLI), {served['first_codes']} (server)")
    print(f"cold `offlint check --no-cache`: median {cold_median * 1000:.0f} ms over {len(cold)} runs")
    print(f"server, first diagnostics after initialize + open: {served['first_diagnostics_s'] * 1000:.0f} ms")
    print(
        f"server, warm edit -> diagnostics: median {edit_median * 1000:.0f} ms, p90 {edit_p90 * 1000:.0f} ms,"
        f" max {max(edits) * 1000:.0f} ms over {len(edits)} edits (target 200 ms)"
    )
    print(
        f"the fast pass's analysis alone (check_buffer in-process, no server):"
        f" median {statistics.median(alone) * 1000:.0f} ms over {len(alone)} edits; by stage: "
        + ", ".join(f"{k} {v * 1000:.0f}" for k, v in sorted(stages.items(), key=lambda kv: -kv[1]) if v >= 0.002)
    )
    print(f"ratio cold check / warm edit: {cold_median / edit_median:.1f}x")
    print(f"load average {os.getloadavg()[0]:.2f}; record: {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
