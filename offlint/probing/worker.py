"""The probe's worker process: runs scenarios for the parent, one GPU, one process at a time.

`python -m offlint.probing.worker --serve` reads commands on stdin, one a line, each
`COMMAND<TAB>SPEC.json<TAB>RESULT.json`:

- `validate`: load the TARGET class or the `--entry` module and check its arguments, then check
  that torch sees the GPUs the spec lists (`gpus`), with no CUDA work: a bad target is one line
  and exit 2 before any scenario, and the parent never imports the user's code (a hang or a
  `SystemExit` at import stays in this process, under the parent's timeout);
- `run`: run one scenario and write its result.

After each command it writes `offlint-done` on its protocol channel (the stdout it started with;
the user's own prints go to stderr), and `offlint-phase NAME` as each phase of a scenario
starts, so the parent can say where a timeout struck. Scenarios that need no isolation share the
process (and its CUDA context, profiler start-up and baseline); the parent starts a fresh one
after a scenario whose capture failed or that raised. `python -m offlint.probing.worker SPEC.json
RESULT.json` runs one scenario and exits (the older form).
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from offlint.probing import protocol
from offlint.probing.spec import ScenarioSpec


def finite_json(value: Any) -> Any:
    """JSON has no inf/NaN: a non-finite number becomes null (checks treat null as failed)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(key): finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def run_one(spec: ScenarioSpec) -> dict[str, Any]:
    try:
        from offlint.probing.scenario import run_scenario

        return run_scenario(spec)
    except BaseException as exc:  # even KeyboardInterrupt: the parent wants to know
        return {
            "scenario": spec.name,
            "target": spec.target,
            "worker_error": "".join(traceback.format_exception(exc))[-6000:],
        }


def validate(spec: ScenarioSpec, gpus: list[int]) -> dict[str, Any]:
    """{"error": one line} when the target or the GPUs are unusable, else {"error": None}."""
    from offlint.probing.errors import ProbeUsageError, one_line

    try:
        try:
            import torch
        except ImportError as exc:
            raise ProbeUsageError(
                f"torch cannot be imported ({exc}): offlint probe needs PyTorch with CUDA "
                "(pip install 'offlint[probe]')"
            ) from None
        if spec.entry:
            from offlint.probing.entry import check_build_arguments, load_entry

            check_build_arguments(load_entry(spec.target), spec.init_kwargs)
        elif spec.target:
            from offlint.probing.target import check_constructor, load_target

            check_constructor(load_target(spec.target, spec.methods), dict(spec.init_kwargs))
        visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
        for index in gpus:
            if index >= visible:
                why = "" if torch.version.cuda else f" (torch {torch.__version__} has no CUDA)"
                raise ProbeUsageError(f"no CUDA device {index}: {visible} visible{why}")
    except ProbeUsageError as exc:
        return {"error": str(exc)}
    except BaseException as exc:
        return {"error": one_line(exc)}
    return {"error": None}


def _write(path: str, result: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(finite_json(result), indent=2), encoding="utf-8")


def serve() -> int:
    # The protocol keeps the real stdout; whatever the user's code prints goes to stderr.
    protocol.open_channel()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 3:
            continue
        command, spec_path, result_path = parts
        data = json.loads(Path(spec_path).read_text(encoding="utf-8"))
        gpus = data.pop("gpus", [])
        spec = ScenarioSpec.from_json(data)
        if command == "validate":
            _write(result_path, validate(spec, gpus))
        else:
            _write(result_path, run_one(spec))
        protocol.send("offlint-done")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[1] == "--serve":
        return serve()
    if len(argv) != 3:
        print(
            "usage: python -m offlint.probing.worker --serve | SPEC.json RESULT.json",
            file=sys.stderr,
        )
        return 2
    spec = ScenarioSpec.read(Path(argv[1]))
    _write(argv[2], run_one(spec))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
