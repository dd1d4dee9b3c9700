"""`offlint fix --compile-safe` (issue 14, item 3): fixes that put no capture test on a path
torch.compile traces.

Dynamo cannot trace `torch.cuda.is_current_stream_capturing()` (shared/GROUND-TRUTH.md section 1).
Compile-safe output: the primed overlap with a pending flag instead of the capture tag, fork joins
that run always, and the rewrites that need the capture state at run time left "not fixed" with
that reason. On the fixtures and the corpus files the fix rewrites: the output parses, holds no
capture test the input did not, `check` on it reports no OFL301 and no finding the fix did not
explain, and a second fix is a no-op. "auto" (the default) is on exactly where the module uses
torch.compile; `[tool.offlint.fix] compile-safe` sets it; a bad value is a one-line config error.
The fixed SGLang offloader was run on an H200 (benchmarks/results/fix-compile-safe-h200-*.json).
"""

from __future__ import annotations

import ast
import re
import sys
import types
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.cli import main
from offlint.diagnostics import Confidence, Diagnostic
from offlint.fixing.apply import FIXABLE_RULES, FileFix, FixSettings
from offlint.fixing.compile_safe import parse_setting
from offlint.fixing.loop import fix_source
from tests.test_fix_dataflow import CaptureError, capture, fresh_torch

# these tests fix for an engine that captures whole forwards (`capture-modes = ["whole"]`):
# the rewrites the split capture modes defeat are offered only there (fixing/capture_modes.py)
WHOLE = ("whole",)
WHOLE_PROJECT = '[tool.offlint]\ncapture-modes = ["whole"]\n'

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GOLDEN = FIXTURES / "golden"
ORIGINAL = FIXTURES / "sglang_offloader_original.py"
MERGED_INLINE = FIXTURES / "sglang_offloader_inline.py"
SELECT = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)
FLOOR = Confidence.LOW  # fixes act on every finding, hidden ones too
CAPTURE_TEST = "is_current_stream_capturing"
# every finding of these left after fixing carries the fixer's reason
EXPLAINED = ("OFL101", "OFL103", "OFL201", "OFL202", "OFL204")


def _fix(data: bytes, *, compile_safe: bool | None, strategy: str = "auto", path: str = "m.py") -> FileFix:
    settings = FixSettings(
        select=SELECT, strategy=strategy, min_confidence=FLOOR, compile_safe=compile_safe, capture_modes=WHOLE
    )
    result = fix_source(data, path, settings)
    assert not result.errors, [e.message for e in result.errors]
    return result


def _capture_tests(data: bytes) -> int:
    """Calls of the capture test in the code (docstrings and comments may name it)."""
    return sum(
        1
        for node in ast.walk(ast.parse(data))
        if isinstance(node, ast.Call)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)) == CAPTURE_TEST
    )


def _findings(data: bytes, path: str = "m.py") -> list[Diagnostic]:
    report = check_source(data, path, FileSettings(select=SELECT, min_confidence=FLOOR))
    assert not report.errors
    return [d for d in report.diagnostics if d.confidence.at_least(FLOOR)]


def _assert_compile_safe_contract(data: bytes, path: str) -> FileFix:
    result = _fix(data, compile_safe=True, path=path)
    fixed = result.fixed
    compile(fixed, path, "exec")
    assert _capture_tests(fixed) <= _capture_tests(data), "the fix wrote a capture test"
    before = Counter(d.code for d in _findings(data, path))
    after = _findings(fixed, path)
    counted = Counter(d.code for d in after)
    assert counted["OFL301"] <= before["OFL301"]
    assert all(counted[code] <= before[code] for code in counted), (before, counted)
    reasons = {(n.diagnostic.code, n.diagnostic.location.line) for n in result.not_fixed}
    unexplained = [
        f"{d.code}:{d.location.line}"
        for d in after
        if d.code in EXPLAINED and (d.code, d.location.line) not in reasons
    ]
    assert unexplained == []
    assert _fix(fixed, compile_safe=True, path=path).fixed == fixed, "a second fix changes the output"
    return result


# ----------------------------------------------------------------------------- fixtures and corpus

FIXTURE_INPUTS = sorted(FIXTURES.glob("*.py")) + sorted(GOLDEN.glob("*/in.py"))


@pytest.mark.parametrize("path", FIXTURE_INPUTS, ids=lambda p: p.relative_to(FIXTURES).as_posix())
def test_compile_safe_contract_on_the_fixtures(path: Path) -> None:
    _assert_compile_safe_contract(path.read_bytes(), str(path))


def test_the_fixtures_are_fixed_compile_safe() -> None:
    """Not vacuous: compile-safe fixing changes the fixtures it should, and the default fix of
    the SGLang ones writes the capture test it avoids."""
    changed = {
        path.relative_to(FIXTURES).as_posix()
        for path in FIXTURE_INPUTS
        if _fix(path.read_bytes(), compile_safe=True, path=str(path)).changed
    }
    assert {
        "sglang_offloader_original.py",
        "sglang_offloader_inline.py",
        "group_offload_record_stream.py",
        "golden/record_stream/in.py",
        "golden/pin_memory/in.py",
    } <= changed
    assert _capture_tests(_fix(ORIGINAL.read_bytes(), compile_safe=False).fixed) > 0


# the corpus files the fix rewrites, or leaves for the capture state (project, path in its archive)
CORPUS_FILES = (
    ("sglang", "sglang/srt/utils/offloader.py"),
    ("sglang", "sglang/srt/managers/overlap_utils.py"),
    ("accelerate", "accelerate/hooks.py"),
    ("deepspeed", "deepspeed/module_inject/auto_ep_layer.py"),
    ("fastvideo", "fastvideo/models/vaes/minimax_h3_parallel.py"),
    ("megatron-core", "megatron/core/pipeline_parallel/fine_grained_activation_offload.py"),
    ("megatron-core", "megatron/core/transformer/moe/token_dispatcher.py"),
    ("transformer-engine", "transformer_engine/pytorch/cpu_offload.py"),
)


@pytest.fixture(scope="module")
def corpus() -> dict[tuple[str, str], Path]:
    from benchmarks.corpus import CorpusUnavailable, load_corpus, prepare

    try:
        located = prepare(load_corpus())
    except CorpusUnavailable as exc:
        pytest.skip(f"corpus unavailable (needs its archives or the network): {exc}")
    by_name: dict[tuple[str, str], Path] = {}
    for path, (project, name) in located.items():
        for wanted_project, wanted in CORPUS_FILES:
            if project == wanted_project and name.endswith(wanted):
                by_name[(wanted_project, wanted)] = path
    return by_name


@pytest.mark.parametrize(("project", "name"), CORPUS_FILES, ids=[n for _, n in CORPUS_FILES])
def test_compile_safe_contract_on_the_corpus(corpus: dict[tuple[str, str], Path], project: str, name: str) -> None:
    path = corpus.get((project, name))
    assert path is not None, f"{project}: {name} is not in the corpus any more"
    result = _assert_compile_safe_contract(path.read_bytes(), str(path))
    assert result.changed or any("compile-safe" in n.reason for n in result.not_fixed)


# ----------------------------------------------------------------------------- the offloader rewrite

GOLDEN_CASES = (("sglang_original", ORIGINAL), ("sglang_merged_inline", MERGED_INLINE))


@pytest.mark.parametrize(("case", "source"), GOLDEN_CASES, ids=[c for c, _ in GOLDEN_CASES])
@pytest.mark.parametrize("strategy", ["auto", "overlap", "inline"])
def test_compile_safe_golden(case: str, source: Path, strategy: str) -> None:
    """Whatever the strategy, compile-safe is the primed overlap with a pending flag."""
    golden = (GOLDEN / case / "compile_safe" / "out_overlap.py").read_bytes()
    result = _fix(source.read_bytes(), compile_safe=True, strategy=strategy)
    assert result.fixed == golden
    assert result.strategies == ["overlap"]
    if strategy == "inline":
        assert any("compile-safe uses the primed overlap" in note for note in result.notes)
    assert _capture_tests(golden) == 0
    text = golden.decode()
    assert "        if not self._load_event_pending:\n            # Nothing of this forward is pending" in text
    assert re.search(r"\n        self\._load_event\.wait\(\)[^\n]*\n        self\._load_event_pending = False\n", text)
    assert "all_modules[0].register_forward_pre_hook(self._on_forward_start)" in text


@pytest.mark.parametrize(("case", "source"), GOLDEN_CASES, ids=[c for c, _ in GOLDEN_CASES])
def test_compile_safe_golden_is_a_fixed_point_and_checks_clean(case: str, source: Path) -> None:
    golden = (GOLDEN / case / "compile_safe" / "out_overlap.py").read_bytes()
    for setting in (True, False, None):
        assert _fix(golden, compile_safe=setting).fixed == golden
    assert {d.code for d in _findings(golden)} & {"OFL101", "OFL103", "OFL201", "OFL202", "OFL301"} == set()


def test_a_shape_the_primed_overlap_does_not_fit_is_left_with_the_reason() -> None:
    """vLLM's shape (no class owns the modules): the default fix falls back to an end-of-forward
    join that branches on the capture state; compile-safe leaves it and says why."""
    data = (GOLDEN / "module_offloader_no_owner" / "in.py").read_bytes()
    result = _fix(data, compile_safe=True)
    assert not result.changed
    left = {n.diagnostic.code: n.reason for n in result.not_fixed}
    assert {"OFL101", "OFL103"} <= set(left)
    assert all("compile-safe" in reason and "--no-compile-safe" in reason for reason in left.values())
    assert _fix(data, compile_safe=False).changed


def test_a_hand_off_outside_the_shape_is_left_and_its_fork_not_joined_alone() -> None:
    data = (FIXTURES / "block_hook_offloader.py").read_bytes()
    result = _fix(data, compile_safe=True)
    assert not result.changed
    reasons = {n.diagnostic.code: n.reason for n in result.not_fixed}
    assert "needs the capture state at run time" in reasons["OFL101"]
    assert "a join here alone would not make the wait capturable" in reasons["OFL103"]
    assert _fix(data, compile_safe=False).changed


HOOK = """\
import torch


class CastingHook:
    def __init__(self, storage_dtype, compute_dtype):
        self.storage_dtype = storage_dtype
        self.compute_dtype = compute_dtype

    def pre_forward(self, module, *args, **kwargs):
        module.to(dtype=self.compute_dtype)
        return args, kwargs

    def post_forward(self, module, output):
        module.to(dtype=self.storage_dtype)
        return output
"""


def test_a_hook_move_is_left_compile_safe() -> None:
    data = HOOK.encode()
    assert "OFL201" in {d.code for d in _findings(data)}
    result = _fix(data, compile_safe=True)
    assert not result.changed
    [left] = [n for n in result.not_fixed if n.diagnostic.code == "OFL201"]
    assert "needs the capture state at run time" in left.reason
    assert _fix(data, compile_safe=False).changed


# ----------------------------------------------------------------------------- fork joins

EVICTOR = """\
import torch


class Evictor:
    def __init__(self):
        self.side = torch.cuda.Stream()
        self.done = torch.cuda.Event()

    def evict(self, host, dev):
        cur = torch.cuda.current_stream()
        self.side.wait_stream(cur)
        with torch.cuda.stream(self.side):
            host.copy_(dev, non_blocking=True)
            self.done.record()
        return host
"""


class _Tensor:
    def copy_(self, other: object, non_blocking: bool = False) -> None:
        pass


def _run_evictor(source: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", fresh_torch())
    module = types.ModuleType("evictor")
    exec(compile(source, "m.py", "exec"), module.__dict__)
    evictor = module.Evictor()
    evictor.evict(_Tensor(), _Tensor())
    with capture():
        evictor.evict(_Tensor(), _Tensor())
    evictor.evict(_Tensor(), _Tensor())


def test_fork_join_runs_always_and_captures(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _fix(EVICTOR.encode(), compile_safe=True)
    text = result.fixed.decode()
    assert (
        "            self.done.record()\n"
        "        # Join the fork before this call ends: a capture must not end with it open. Always,\n"
        "        # not only while capturing: torch.compile cannot trace a capture test (compile-safe).\n"
        "        cur.wait_stream(self.side)\n"
        "        return host\n"
    ) in text
    assert _capture_tests(result.fixed) == 0
    assert "OFL103" not in {d.code for d in _findings(result.fixed)}
    with pytest.raises(CaptureError, match="904"):
        _run_evictor(EVICTOR.encode(), monkeypatch)
    _run_evictor(result.fixed, monkeypatch)  # the fork is joined before the capture ends


def test_fork_join_keeps_the_forks_own_condition() -> None:
    source = EVICTOR.replace("    def evict(self, host, dev):", "    def evict(self, host, dev, asynchronous=True):").replace(
        "        self.side.wait_stream(cur)\n", "        if asynchronous:\n            self.side.wait_stream(cur)\n"
    )
    text = _fix(source.encode(), compile_safe=True).fixed.decode()
    assert "        if asynchronous:\n            cur.wait_stream(self.side)\n        return host\n" in text


# ----------------------------------------------------------------------------- auto

COMPILED_FORK = """\
import torch
from torch import nn


class PrefetchingBlock(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.side = torch.cuda.Stream()
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.host = torch.empty(hidden, hidden, pin_memory=True)

    @torch.compile(fullgraph=True)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        current = torch.cuda.current_stream()
        self.side.wait_stream(current)
        with torch.cuda.stream(self.side):
            self.next_weight = self.host.to("cuda", non_blocking=True)
        return self.proj(x)
"""


def test_auto_is_on_where_the_module_uses_torch_compile() -> None:
    data = COMPILED_FORK.encode()
    auto = _fix(data, compile_safe=None)
    assert auto.fixed == _fix(data, compile_safe=True).fixed
    assert _capture_tests(auto.fixed) == 0
    assert {d.code for d in _findings(auto.fixed)} & {"OFL103", "OFL301"} == set()
    # the default fix would put the capture test in the compiled forward: OFL301 says so
    default = _fix(data, compile_safe=False)
    assert _capture_tests(default.fixed) > 0
    assert "OFL301" in {d.code for d in _findings(default.fixed)}


def test_auto_is_off_without_torch_compile() -> None:
    data = ORIGINAL.read_bytes()
    assert _fix(data, compile_safe=None).fixed == (GOLDEN / "sglang_original" / "out_overlap.py").read_bytes()


def test_auto_sees_a_torch_compile_call_anywhere_in_the_module() -> None:
    data = ORIGINAL.read_bytes() + b"\n\ncompiled_accessor = torch.compile(_whole_module)\n"
    fixed = _fix(data, compile_safe=None).fixed
    assert _capture_tests(fixed) == 0
    assert b"self._load_event_pending = False" in fixed


# ----------------------------------------------------------------------------- settings: CLI, config


def test_setting_values() -> None:
    assert parse_setting("auto") is None
    assert parse_setting(True) is True
    assert parse_setting(False) is False
    for bad in ("yes", "true", 1, None):
        with pytest.raises(ValueError, match="compile-safe must be"):
            parse_setting(bad)


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["fix", "--no-color", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "offloader.py").write_bytes(ORIGINAL.read_bytes())
    (tmp_path / "pyproject.toml").write_text(WHOLE_PROJECT)
    return tmp_path


def _fixed_by_cli(project: Path, *args: str) -> bytes:
    code, _, err = _cli("--apply", "--exit-zero", *args, str(project / "offloader.py"))
    assert code == 0, err
    return (project / "offloader.py").read_bytes()


def test_cli_flags(project: Path) -> None:
    compile_safe = (GOLDEN / "sglang_original" / "compile_safe" / "out_overlap.py").read_bytes()
    default = (GOLDEN / "sglang_original" / "out_overlap.py").read_bytes()
    assert _fixed_by_cli(project, "--compile-safe") == compile_safe
    (project / "offloader.py").write_bytes(ORIGINAL.read_bytes())
    assert _fixed_by_cli(project, "--no-compile-safe") == default
    (project / "offloader.py").write_bytes(ORIGINAL.read_bytes())
    assert _fixed_by_cli(project) == default  # auto: nothing here is compiled


@pytest.mark.parametrize(("value", "golden"), [("true", "compile_safe/out_overlap.py"), ('"auto"', "out_overlap.py")])
def test_config_key(project: Path, value: str, golden: str) -> None:
    (project / "pyproject.toml").write_text(f"{WHOLE_PROJECT}[tool.offlint.fix]\ncompile-safe = {value}\n")
    assert _fixed_by_cli(project) == (GOLDEN / "sglang_original" / golden).read_bytes()


def test_the_flag_wins_over_the_config(project: Path) -> None:
    (project / "pyproject.toml").write_text(f"{WHOLE_PROJECT}[tool.offlint.fix]\ncompile-safe = true\n")
    assert _fixed_by_cli(project, "--no-compile-safe") == (GOLDEN / "sglang_original" / "out_overlap.py").read_bytes()


def test_a_bad_config_value_is_a_one_line_config_error(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.offlint.fix]\ncompile-safe = "sometimes"\n')
    before = (project / "offloader.py").read_bytes()
    code, _, err = _cli("--apply", str(project / "offloader.py"))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "compile-safe" in lines[0] and "Traceback" not in err, err
    assert (project / "offloader.py").read_bytes() == before
