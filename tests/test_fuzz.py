"""A short fuzz run in CI (the long one is benchmarks/fuzz.py, results in benchmarks/results/).

Inputs: offloader-shaped programs from a small statement grammar (streams, events, record / wait /
wait_stream, `with torch.cuda.stream`, capture guards, graphs, hooks, early returns, random
nesting), mutations of the fixtures and of the rules' examples, and arbitrary bytes.
Properties: `check` never raises and never reports `internal-error`; its two front ends (the
skeleton and the libcst reference) give the same results; `fix` output parses, is idempotent, and
leaves bytes outside its edits (a bystander block, BOM, CRLF) unchanged.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offlint.analysis import engine
from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.diagnostics import ErrorKind, FileReport

_SPEC = importlib.util.spec_from_file_location(
    "offlint_fuzz", Path(__file__).resolve().parent.parent / "benchmarks" / "fuzz.py"
)
assert _SPEC is not None and _SPEC.loader is not None
fuzz = importlib.util.module_from_spec(_SPEC)
sys.modules["offlint_fuzz"] = fuzz
_SPEC.loader.exec_module(fuzz)

SEEDS = fuzz.corpus()
ALL = frozenset(load_catalogue())
FAST = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _assert_ok(data: bytes, *, fix: bool = True) -> None:
    failures = fuzz.failures_for(data, fix=fix)
    assert not failures, (failures, data.decode("utf-8", "replace"))


def test_corpus_is_loaded() -> None:
    assert len(SEEDS) >= 20  # fixtures and every rule's examples


@FAST
@given(st.randoms(use_true_random=False))
def test_generated_offloaders(r: random.Random) -> None:
    text = fuzz.generate(r)
    _assert_ok(text.encode())


@FAST
@given(st.randoms(use_true_random=False), st.sampled_from(range(len(SEEDS))))
def test_mutated_examples_and_fixtures(r: random.Random, index: int) -> None:
    _assert_ok(fuzz.mutate(r, SEEDS[index]))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_crash_check(data: bytes) -> None:
    # hazard tokens up front so the prefilter lets the bytes through to the parser
    data = b"import torch\nclass Offloader:\n    def f(self):\n        self.e.wait()\n" + data
    report = check_source(data, "b.py", FileSettings(select=ALL))
    assert all(e.kind is not ErrorKind.INTERNAL for e in report.errors), report.errors
    assert fuzz.front_end_failures(data, "b.py", FileSettings(select=ALL)) == []


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(fuzz.TOKENS), max_size=60))
def test_token_soup_never_crashes_check(soup: list[str]) -> None:
    _assert_ok(("import torch\nclass Offloader:\n    def f(self):\n" + "".join(soup)).encode(), fix=False)


def test_fix_keeps_its_edits_on_code_cpython_refuses() -> None:
    """libcst parses a module-level `return`, CPython does not: the fixer is not to blame, so its
    edit is kept (it used to be dropped as an internal error). Found by benchmarks/fuzz.py."""
    for number in (1921, 4147, 6736):
        _, data = fuzz.make_input(number, SEEDS)
        _assert_ok(data)


def test_front_end_differences_are_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """A difference between the front ends is a failure of its own kind, with what differs."""
    data = (fuzz.FIXTURES / "capture_hazards_zoo.py").read_bytes()
    assert fuzz.failures_for(data, fix=False) == []
    real = engine.check_source

    def skeleton_misses_one(data: bytes, path: str, settings: FileSettings, **kw: bool) -> FileReport:
        report = real(data, path, settings, **kw)
        if settings.front_end == "skeleton":
            report.diagnostics = report.diagnostics[1:]
        return report

    monkeypatch.setattr(engine, "check_source", skeleton_misses_one)
    found = fuzz.front_end_failures(data, "zoo.py", FileSettings(select=ALL))
    assert [kind for kind, _ in found] == ["front-ends-differ"]
    assert "libcst only ['OFL" in found[0][1] and "skeleton only []" in found[0][1]
