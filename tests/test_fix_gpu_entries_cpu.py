"""What tests/test_fix_gpu.py runs on the H200, checked without a GPU: the fixtures with a
fixable finding that can run as an offloader, `offlint fix --apply` on a copy of each (the
default strategy, and `--strategy inline` where its output differs), `offlint check` on the
output clean of the codes fixed, a second fix a no-op, the fixed module importable without CUDA
work, and the `--entry` builders of tests/data/fixed_entries/ importable with the arguments the
GPU test gives them. (The builders themselves need CUDA: streams and pinned host memory.)

The case table and the fixing helpers live here, so that CI exercises them; the GPU test
imports them.
"""

from __future__ import annotations

import ast
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.probing.options import ModelConfig

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
BUILDERS = Path(__file__).resolve().parent / "data" / "fixed_entries"

# The life cycle at a small size: 8 layers, every 2nd offloaded (4 offloaded layers, one H2D
# copy each per step).
SMALL = ModelConfig(
    layers=8, hidden=1024, dtype="bfloat16", batch_sizes=(256, 128), offload_every=2, prefetch=1
)
# The timing size: the probe's overlap bar (graph step <= 1.1x eager) held there with the most
# margin on the H200 (benchmarks/results/probe-h200-light-2026-12-02.json: 1.01x); still 4
# offloaded layers, 32 MiB each.
TIMED = ModelConfig(
    layers=16, hidden=4096, dtype="bfloat16", batch_sizes=(1024, 512), offload_every=4, prefetch=1
)


@dataclass(frozen=True)
class FixtureCase:
    """A fixture `offlint fix` rewrites and that can run as an offloader, and how it runs:
    SGLang's orchestrator shape as a probe TARGET (`file.py:Offloader`), anything else through
    its builder in tests/data/fixed_entries/ (`--entry`)."""

    name: str
    fixture: str  # relative to fixtures/
    strategies: tuple[str, ...]  # `auto` (the default), and `inline` where its output differs
    builder: str | None = None  # tests/data/fixed_entries/<builder>.py, None: a TARGET
    # The default strategy's output keeps the copies overlapping compute (timed against the
    # 1.1x bar); False for a rewrite that joins every copy where it is made.
    overlap: bool = True

    @property
    def source(self) -> Path:
        return FIXTURES / self.fixture

    @property
    def builder_path(self) -> Path | None:
        return BUILDERS / f"{self.builder}.py" if self.builder else None


CASES = (
    FixtureCase("sglang_original", "sglang_offloader_original.py", ("auto", "inline")),
    FixtureCase("sglang_inline", "sglang_offloader_inline.py", ("auto", "inline")),
    FixtureCase(
        "module_offloader_no_owner",
        "golden/module_offloader_no_owner/in.py",
        ("auto", "inline"),
        builder="module_offloader_no_owner",
    ),
    FixtureCase("block_hook", "block_hook_offloader.py", ("auto",), builder="block_hook_offloader"),
    FixtureCase(
        "group_offload_record_stream",
        "group_offload_record_stream.py",
        ("auto",),
        builder="group_offload_record_stream",
        overlap=False,
    ),
    FixtureCase(
        "capture_hazards_zoo", "capture_hazards_zoo.py", ("auto",), builder="capture_hazards_zoo"
    ),
)
CASE_STRATEGIES = [(case, strategy) for case in CASES for strategy in case.strategies]


class Workers:
    """Scenarios share one probe worker process (one CUDA context, one profiler start-up), as
    `offlint probe` shares it; after a failed capture or an error the next gets a fresh one (a
    capture error can leave the CUDA context unusable). The GPU tests' pool."""

    def __init__(self, timeout_s: float) -> None:
        self.worker: Any = None
        self.timeout_s = timeout_s

    def run(self, spec: Any) -> dict[str, Any]:
        from offlint.probing.runner import WorkerProcess, needs_fresh_process, run_in

        if self.worker is None:
            self.worker = WorkerProcess()
        raw = run_in(self.worker, spec, self.timeout_s)
        if needs_fresh_process(raw):
            self.close()
        return raw

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def case_id(case: FixtureCase, strategy: str) -> str:
    return f"{case.name}-{strategy}"


def fix_has_compile_safe() -> bool:
    """Whether `offlint fix` offers `--compile-safe` yet (another change adds it)."""
    result = CliRunner().invoke(main, ["fix", "--help"])
    return "--compile-safe" in result.output


@dataclass(frozen=True)
class FixedOutput:
    path: Path
    fixed_codes: frozenset[str]  # what the fix's edits fix (their rules and also_fixes)
    left: tuple[str, ...]  # codes `fix` says are left after fixing
    report: dict[str, Any]  # the file's entry in `fix`'s JSON report

    @property
    def not_fixed(self) -> list[str]:
        """`CODE at line N: reason` for each finding the fix reports it left alone."""
        return [f"{n['code']} at line {n['line']}: {n['reason']}" for n in self.report["not_fixed"]]


def run_fix(path: Path, *options: str) -> dict[str, Any]:
    """`offlint fix --apply --output-format json` on one file, in process; its JSON report."""
    result = CliRunner().invoke(
        main, ["fix", "--apply", "--no-color", "--output-format", "json", *options, str(path)]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    # 1: hazards left after fixing (the zoo's OFL105); anything else is an error.
    assert result.exit_code in (0, 1), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["errors"] == [], report["errors"]
    assert all(entry["errors"] == [] for entry in report["files"]), report["files"]
    return report


def fix_copy(
    case: FixtureCase, strategy: str, folder: Path, *options: str, modes: tuple[str, ...] | None = ("whole",)
) -> FixedOutput:
    """Copy the fixture into `folder` and fix it there with `strategy`, for an engine that
    captures as `modes` say (`[tool.offlint] capture-modes`; None: the default, every mode). The
    whole-capture life cycle (tests/test_fix_gpu.py) fixes for whole forwards; the capture-mode
    matrix (tests/test_fix_capture_modes_gpu.py) fixes with the default."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / case.source.name
    shutil.copy(case.source, path)
    lines = ["[tool.offlint]"] + ([f"capture-modes = {json.dumps(list(modes))}"] if modes else [])
    (folder / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = run_fix(path, "--strategy", strategy, *options)
    (entry,) = report["files"]
    codes = frozenset(
        code for edit in entry["edits"] for code in (edit["rule"], *edit["also_fixes"])
    )
    left = tuple(item["code"] for item in entry["left"])
    return FixedOutput(path, codes, left, entry)


def check_codes(path: Path) -> set[str]:
    """The codes `offlint check` reports on `path` at the default confidence floor (`path`
    outside the repository: its configuration excludes fixtures/ and tests/)."""
    result = CliRunner().invoke(
        main, ["check", "--no-cache", "--no-color", "--output-format", "offlint-json", str(path)]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code in (0, 1), result.output
    document = json.loads(result.stdout)
    assert document["errors"] == [], document["errors"]
    return {diagnostic["code"] for diagnostic in document["diagnostics"]}


def entry_kwargs(case: FixtureCase, fixed: Path, config: ModelConfig) -> dict[str, Any]:
    """The builder's arguments for a model of `config`'s size."""
    kwargs: dict[str, Any] = {
        "fixed": str(fixed),
        "layers": config.layers,
        "hidden": config.hidden,
        "every": config.offload_every,
        "dtype": config.dtype,
    }
    if case.builder == "module_offloader_no_owner":
        kwargs["prefetch"] = config.prefetch
    return kwargs


# --- the static half, on the CPU -----------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "strategy"), CASE_STRATEGIES, ids=[case_id(c, s) for c, s in CASE_STRATEGIES]
)
def test_fix_removes_the_codes_it_fixes_and_converges(
    case: FixtureCase, strategy: str, tmp_path: Path
) -> None:
    (tmp_path / "before").mkdir()
    before = check_codes(Path(shutil.copy(case.source, tmp_path / "before")))
    fixed = fix_copy(case, strategy, tmp_path)
    assert fixed.report["written"] and fixed.fixed_codes, fixed.report  # each has a fix
    assert fixed.not_fixed == []
    assert fixed.fixed_codes & before, (fixed.fixed_codes, before)
    ast.parse(fixed.path.read_text(encoding="utf-8"))
    after = check_codes(fixed.path)
    assert not after & fixed.fixed_codes, after
    assert after == set(fixed.left)
    again = run_fix(fixed.path, "--strategy", strategy)
    assert not any(entry["changed"] for entry in again["files"]), again


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.strategies == ("auto",)], ids=lambda case: case.name
)
def test_inline_writes_the_default_output_where_only_the_default_runs(
    case: FixtureCase, tmp_path: Path
) -> None:
    default = fix_copy(case, "auto", tmp_path / "auto")
    inline = fix_copy(case, "inline", tmp_path / "inline")
    assert default.path.read_bytes() == inline.path.read_bytes()


def test_the_zoo_keeps_one_hazard_the_gpu_test_runs_into(tmp_path: Path) -> None:
    """OFL105 (`.item()` in the pre-hook) has no fix: the builder's `range_check=True` keeps it
    and the GPU test expects the capture to fail there."""
    (zoo,) = [case for case in CASES if case.name == "capture_hazards_zoo"]
    fixed = fix_copy(zoo, "auto", tmp_path)
    # OFL107 (the timing events' elapsed_time after a replay, in DecodeRunner) has no fix either
    assert fixed.left == ("OFL105", "OFL107")
    (line,) = [item["line"] for item in fixed.report["left"] if item["code"] == "OFL105"]
    text = fixed.path.read_text(encoding="utf-8").splitlines()[line - 1]
    assert ".item()" in text


# --- the fixed modules and the builders, without CUDA ------------------------------------------


@pytest.mark.parametrize(
    ("case", "strategy"), CASE_STRATEGIES, ids=[case_id(c, s) for c, s in CASE_STRATEGIES]
)
def test_fixed_modules_import_and_builders_take_the_gpu_tests_arguments(
    case: FixtureCase, strategy: str, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    from offlint.probing.entry import check_build_arguments, import_user_module, load_entry

    fixed = fix_copy(case, strategy, tmp_path)
    module, _ = import_user_module(str(fixed.path), "fixed module")  # no CUDA work at import
    if case.builder_path is None:
        assert isinstance(getattr(module, "Offloader", None), type)
        return
    entry = load_entry(f"{case.builder_path}:build")
    builder = sys.modules[entry.function.__module__]
    # The names the builder takes from the fixed module are there.
    for constant in ("OFFLOADER", "GROUP", "HOOK"):
        name = getattr(builder, constant, None)
        if name is not None:
            assert callable(getattr(module, name, None)), (constant, name)
    for config in (SMALL, TIMED):
        check_build_arguments(entry, entry_kwargs(case, fixed.path, config))


@pytest.mark.skipif(not fix_has_compile_safe(), reason="`offlint fix --compile-safe` not there yet")
@pytest.mark.parametrize(
    ("case", "strategy"), CASE_STRATEGIES, ids=[case_id(c, s) for c, s in CASE_STRATEGIES]
)
def test_compile_safe_output_is_clean_of_ofl301_or_says_why_not(
    case: FixtureCase, strategy: str, tmp_path: Path
) -> None:
    """What the compiled GPU cases start from: `--compile-safe` either fixes (and `check` then
    shows neither the fixed codes nor OFL301) or leaves the findings with a reason each."""
    fixed = fix_copy(case, strategy, tmp_path, "--compile-safe")
    if not fixed.report["written"]:
        assert fixed.not_fixed, fixed.report
        assert all(reason.split(": ", 1)[1] for reason in fixed.not_fixed), fixed.not_fixed
        return
    left = check_codes(fixed.path)
    assert not left & (fixed.fixed_codes | {"OFL301"}), left
    # (OFL301 fires only where the module compiles something; these fixtures do not)
    tree = ast.parse(fixed.path.read_text(encoding="utf-8"))
    calls = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "is_current_stream_capturing"
    ]
    assert calls == [], f"capture tests left at lines {calls}"
