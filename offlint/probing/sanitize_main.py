"""`python -m offlint.probing.sanitize_main [--record] [--races] [--report FILE] (SCRIPT | -m MODULE) ARGS`

Runs a Python program under the capture sanitizer (what `offlint probe --sanitize -- python
script.py ...` starts). In the default mode the first violation raises `CaptureHazard` where it
happens; a program that catches it (a graph runner falling back to eager, say) is still reported:
every violation is kept and printed at the end, and the exit status is 1. `--record` lets every
call through and reports them all at the end. `--races` also turns on PyTorch's CUDA sanitizer
and reports its first race between streams as OFL205 (slow: for finding a wrong eager result,
not for timing). `--report FILE` writes them as JSON.
"""

from __future__ import annotations

import json
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

USAGE = (
    "usage: python -m offlint.probing.sanitize_main [--record] [--races] [--report FILE] "
    "(SCRIPT | -m MODULE) [ARGS...]"
)


@dataclass(frozen=True)
class Invocation:
    mode: str  # "raise" or "record"
    races: bool
    report: str | None
    as_module: bool
    target: str
    rest: list[str]


def _parse(argv: list[str]) -> Invocation:
    mode, races, report = "raise", False, None
    args = list(argv)
    while args and args[0] in ("--record", "--races", "--report"):
        flag = args.pop(0)
        if flag == "--record":
            mode = "record"
        elif flag == "--races":
            races = True
        elif args:
            report = args.pop(0)
    if not args:
        raise SystemExit(USAGE)
    if args[0] == "-m":
        if len(args) < 2:
            raise SystemExit(USAGE)
        return Invocation(mode, races, report, True, args[1], args[2:])
    return Invocation(mode, races, report, False, args[0], args[1:])


def main(argv: list[str]) -> int:
    invocation = _parse(argv)
    report, target = invocation.report, invocation.target
    from offlint.probing.sanitizer import CaptureHazard, CaptureSanitizer

    sanitizer = CaptureSanitizer(mode=invocation.mode, races=invocation.races)
    try:
        sanitizer.install()
    except ImportError as exc:
        error = (
            f"{sys.executable} cannot import torch ({exc}): the sanitizer needs PyTorch "
            "(pip install 'offlint[probe]')"
        )
        if report is not None:
            Path(report).write_text(json.dumps({"error": error}), encoding="utf-8")
        else:
            sys.stderr.write(f"offlint sanitizer: {error}\n")
        return 2
    status = 0
    crashed: str | None = None
    sys.argv = [target, *invocation.rest]
    try:
        if invocation.as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, str(Path(target).resolve().parent))
            runpy.run_path(target, run_name="__main__")
    except CaptureHazard:
        status = 1  # reported below, with every other violation
    except SystemExit as exc:
        code = exc.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException as exc:
        crashed = "".join(traceback.format_exception(exc))
        status = 1
    finally:
        sanitizer.uninstall()
    violations = sanitizer.violations
    if crashed:
        sys.stderr.write(crashed)
    for violation in violations:
        sys.stderr.write(violation.report() + "\n")
    if report is not None:
        document: dict[str, Any] = {
            "violations": [v.to_json() for v in violations],
            "limitations": sanitizer.limitations,
            "counts": sanitizer.counts,
            "exit_status": status,
            "crashed": crashed is not None,
        }
        Path(report).write_text(json.dumps(document, indent=2), encoding="utf-8")
    if violations:
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
