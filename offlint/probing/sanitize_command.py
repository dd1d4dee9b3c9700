"""`offlint probe --sanitize -- python script.py ARGS`: run a program under the capture sanitizer.

The command after `--` must start with a Python interpreter (`python`, `python3`, a path to
one) or with a `.py` file (run with this interpreter). It runs as
`INTERPRETER -m offlint.probing.sanitize_main --report FILE SCRIPT ARGS`, in its own process
group (a timeout kills the group), with the program's output passed through; the report comes
back through FILE. `races` adds `--races` (PyTorch's CUDA sanitizer on races between streams,
reported as OFL205). Exit status: 1 when the sanitizer found a violation, else the program's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import offlint
from offlint.probing.errors import ProbeUsageError


def sanitized_command(command: list[str], report: str, races: bool = False) -> list[str]:
    if not command:
        raise ProbeUsageError("--sanitize needs a command after --, e.g. -- python script.py")
    head = command[0]
    if Path(head).name.startswith("python"):
        interpreter, rest = head, command[1:]
    elif head.endswith(".py") or head == "-m":
        interpreter, rest = sys.executable, command
    else:
        raise ProbeUsageError(
            f"--sanitize runs Python programs: the command must start with python or a .py "
            f"file, not {head!r}"
        )
    if not rest:
        raise ProbeUsageError("--sanitize: name the script (or -m module) to run")
    flags = ["--races"] if races else []
    return [interpreter, "-m", "offlint.probing.sanitize_main", *flags, "--report", report, *rest]


def run_sanitized(
    command: list[str], timeout_s: float | None, races: bool = False
) -> tuple[int, dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="offlint-sanitize-") as scratch:
        report = str(Path(scratch) / "report.json")
        argv = sanitized_command(command, report, races)
        env = dict(os.environ)
        root = str(Path(offlint.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        try:
            process = subprocess.Popen(argv, env=env, start_new_session=True)
        except OSError as exc:
            raise ProbeUsageError(f"cannot run {argv[0]}: {exc.strerror}") from None
        try:
            status = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise ProbeUsageError(
                f"the sanitized program ran past --timeout {timeout_s:g} s"
            ) from None
        except KeyboardInterrupt:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            raise
        try:
            document: dict[str, Any] = json.loads(Path(report).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            document = {"violations": [], "limitations": [], "counts": {}, "no_report": True}
    if document.get("error"):
        raise ProbeUsageError(document["error"])
    document["command"] = command
    document["exit_status"] = status
    if document.get("no_report"):
        return (status or 2), document
    return (1 if document["violations"] else status), document


def render_sanitized(document: dict[str, Any]) -> str:
    violations = document.get("violations", [])
    lines = []
    for violation in violations:
        here = violation["here"][0] if violation.get("here") else None
        where = f"{here['file']}:{here['line']}: {here['code']}" if here else "(no line)"
        lines.append(f"{violation['rule']} {violation['name']}: {where}")
        lines.append(f"  {violation['what']}; prevents {violation['prevents']}")
        other = violation.get("other")
        if other:
            lines.append(
                f"  {violation['other_label']}: {other[0]['file']}:{other[0]['line']}: "
                f"{other[0]['code']}"
            )
    if document.get("no_report"):
        lines.append("offlint probe --sanitize: the program left no report (it did not start?)")
    if document.get("limitations"):
        lines.append("not watched: " + "; ".join(document["limitations"]))
    counts = document.get("counts", {})
    seen = ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
    lines.append(
        f"offlint probe --sanitize: {len(violations)} violation(s)"
        + (f"; calls seen: {seen}" if seen else "")
        + f"; program exit status {document.get('exit_status')}"
    )
    return "\n".join(lines)
