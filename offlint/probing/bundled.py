"""The scenarios `offlint probe` runs without a TARGET: the fixtures, each with what it must do.

Exit codes treat these by expectation: the broken original *must* fail its capture with 905 at
the root, the merged inline fix *must* capture but show its two bugs, and so on. A bundled run
exits 0 when every scenario does what it is expected to do, 1 when one does not. A user TARGET
has no such list: it is expected to pass every check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import offlint
from offlint.probing.checks import (
    CAPTURE,
    EAGER,
    EAGER_AFTER_CAPTURE,
    FAIL,
    GRAPH_SPEED,
    H2D_COPIES,
    PASS,
    REPLAY,
    WEIGHT_UPDATE,
    Expectation,
)
from offlint.probing.errors import ProbeUsageError

ORCHESTRATOR_CLASS = "Offloader"


@dataclass(frozen=True)
class BundledScenario:
    name: str
    file_name: str
    description: str
    expectation: Expectation


_ALL_CORRECT = {
    EAGER: PASS,
    CAPTURE: PASS,
    REPLAY: PASS,
    EAGER_AFTER_CAPTURE: PASS,
    WEIGHT_UPDATE: PASS,
    H2D_COPIES: PASS,
}

BUNDLED: tuple[BundledScenario, ...] = (
    BundledScenario(
        "original",
        "sglang_offloader_original.py",
        "SGLang before the fix: side stream always, event stored on self, wrap-around prefetch",
        Expectation({EAGER: PASS, CAPTURE: FAIL}, capture_root_error=905),
    ),
    BundledScenario(
        "inline",
        "sglang_offloader_inline.py",
        "the merged upstream fix: inline H2D when capturing",
        # Its two bugs: capture-made tensors reach the next eager forward, and the wrap-around
        # prefetch copies the first offloaded layer a second time per replay. Its graph is slow
        # (copies serial with compute) but how slow depends on the configuration: not judged.
        Expectation({**_ALL_CORRECT, EAGER_AFTER_CAPTURE: FAIL, H2D_COPIES: FAIL}),
    ),
    BundledScenario(
        "inline-fixed",
        "sglang_offloader_inline_fixed.py",
        "the smallest correct inline fix (what `offlint fix --strategy inline` should write)",
        Expectation(dict(_ALL_CORRECT)),
    ),
    BundledScenario(
        "overlap",
        "sglang_offloader_overlap.py",
        "primed static slots, capture-aware (what `offlint fix --strategy overlap` should write)",
        Expectation({**_ALL_CORRECT, GRAPH_SPEED: PASS}),
    ),
)
BUNDLED_NAMES = tuple(scenario.name for scenario in BUNDLED)


def fixtures_dir() -> Path:
    """`fixtures/` of a source checkout, or `offlint/_fixtures` of an installed wheel."""
    package = Path(offlint.__file__).resolve().parent
    for candidate in (package / "_fixtures", package.parent / "fixtures"):
        if (candidate / BUNDLED[0].file_name).is_file():
            return candidate
    raise ProbeUsageError(
        "the bundled fixtures are not installed (looked in offlint/_fixtures and ./fixtures); "
        "give a TARGET"
    )


def select_bundled(names: tuple[str, ...]) -> list[BundledScenario]:
    if not names:
        return list(BUNDLED)
    unknown = [name for name in names if name not in BUNDLED_NAMES]
    if unknown:
        raise ProbeUsageError(
            f"unknown scenario {unknown[0]!r} (bundled: {', '.join(BUNDLED_NAMES)})"
        )
    return [scenario for scenario in BUNDLED if scenario.name in names]


def bundled_target(scenario: BundledScenario) -> str:
    return f"{fixtures_dir() / scenario.file_name}:{ORCHESTRATOR_CLASS}"
