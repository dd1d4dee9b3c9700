"""The capture sanitizer in pytest (registered as the `pytest11` entry point `offlint`).

- `@pytest.mark.capture_sanitizer` runs the test's body under `capture_sanitizer()`: the first
  stream/event call CUDA graph capture would reject raises `CaptureHazard` where it happens, and
  a test that swallows it (a graph runner falling back to eager) fails anyway with the report.
  `@pytest.mark.capture_sanitizer(mode="record")` lets every call through and fails the test at
  its end with every violation.
- `pytest --capture-sanitizer` does the same for every test.
- the `capture_sanitizer` fixture gives the test a sanitizer in "record" mode to inspect
  (`capture_sanitizer.violations`); the test decides what they mean.
- `@pytest.mark.capture_sanitizer(races=True)`, or `pytest --capture-sanitizer-races` for every
  sanitized test and the fixture, also turns on PyTorch's CUDA sanitizer: an eager race between
  streams (a kernel using a side stream's result with no event or stream wait) is OFL205, with
  both stacks. Slow: off unless asked for.

Loading this plugin imports neither torch nor libcst: the sanitizer installs when a marked test
runs, so pytest sessions without CUDA work are unaffected.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from offlint.probing.sanitizer import CaptureSanitizer

MARKER = "capture_sanitizer"
FIXTURE = "capture_sanitizer"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("offlint")
    group.addoption(
        "--capture-sanitizer",
        action="store_true",
        default=False,
        help="offlint: run every test under the CUDA graph capture sanitizer.",
    )
    group.addoption(
        "--capture-sanitizer-races",
        action="store_true",
        default=False,
        help="offlint: the capture sanitizer also names eager races between streams (OFL205, "
        "through PyTorch's CUDA sanitizer; slow).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(mode='raise', races=False): run the test under offlint's CUDA graph "
        "capture sanitizer; a violation fails it (mode 'record': at its end, with every "
        "violation; races=True: eager races between streams too, OFL205).",
    )


def _races(config: pytest.Config) -> bool:
    return bool(config.getoption("capture_sanitizer_races", default=False))


def _settings(item: pytest.Item) -> tuple[str, bool] | None:
    """The sanitizer mode the test runs under and whether races are watched, or None when it
    does not run under one."""
    if FIXTURE in getattr(item, "fixturenames", ()):
        return None  # the test holds its own sanitizer
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        mode = marker.kwargs.get("mode", marker.args[0] if marker.args else "raise")
        if mode not in ("raise", "record"):
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{MARKER}(mode=...) is 'raise' or 'record', "
                f"not {mode!r}"
            )
        return str(mode), bool(marker.kwargs.get("races", False)) or _races(item.config)
    if item.config.getoption("capture_sanitizer", default=False):
        return "raise", _races(item.config)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[Any]:
    settings = _settings(item)
    if settings is None:
        return (yield)
    mode, races = settings
    sanitizer = CaptureSanitizer(mode=mode, races=races)
    try:
        sanitizer.install()
    except ImportError as exc:
        pytest.skip(f"offlint capture sanitizer: torch is not importable ({exc})")
    try:
        result = yield
    finally:
        sanitizer.uninstall()
    if sanitizer.violations:
        reports = "\n".join(violation.report() for violation in sanitizer.violations)
        pytest.fail(
            f"{len(sanitizer.violations)} capture hazard(s) (a test that caught the "
            f"CaptureHazard still fails):\n{reports}",
            pytrace=False,
        )
    return result


@pytest.fixture(name=FIXTURE)
def capture_sanitizer_fixture(request: pytest.FixtureRequest) -> Iterator[CaptureSanitizer]:
    """A sanitizer in "record" mode for the test's duration: inspect `.violations`."""
    pytest.importorskip("torch", reason="the capture sanitizer needs torch")
    sanitizer = CaptureSanitizer(mode="record", races=_races(request.config))
    sanitizer.install()
    try:
        yield sanitizer
    finally:
        sanitizer.uninstall()
