"""`python -m offlint.probing.worker SPEC.json RESULT.json`: run one scenario in this process.

The parent starts one of these per scenario, so a CUDA context poisoned by a failed capture (or
a crash) ends with its process. The result is written even when the scenario fails; only a
crash of the interpreter itself leaves no file, which the parent reports from the exit status.
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from pathlib import Path
from typing import Any

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


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m offlint.probing.worker SPEC.json RESULT.json", file=sys.stderr)
        return 2
    spec = ScenarioSpec.read(Path(argv[1]))
    try:
        from offlint.probing.scenario import run_scenario

        result = run_scenario(spec)
    except BaseException as exc:  # even KeyboardInterrupt: the parent wants to know
        result = {
            "scenario": spec.name,
            "target": spec.target,
            "worker_error": "".join(traceback.format_exception(exc))[-6000:],
        }
    Path(argv[2]).write_text(json.dumps(finite_json(result), indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
