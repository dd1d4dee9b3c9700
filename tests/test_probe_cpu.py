"""`offlint probe` without a GPU: options, TARGET loading, CUDA error chains, checks, reports
rendered from a recorded H200 run, the no-GPU exit, and a dry run of the whole life cycle on
the CPU with torch.cuda faked (it exercises the code paths, not CUDA semantics).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from offlint.probing.checks import (
    CAPTURE,
    EAGER_AFTER_CAPTURE,
    FAIL,
    GRAPH_SPEED,
    H2D_COPIES,
    PASS,
    SKIP,
    VERDICT_ERROR,
    VERDICT_EXPECTED,
    VERDICT_FAIL,
    VERDICT_PASS,
    VERDICT_UNEXPECTED,
    Expectation,
    Thresholds,
    compare_overlap_with_inline,
    derived_timing,
    evaluate_scenario,
)
from offlint.probing.command import probe_command
from offlint.probing.cuda_errors import (
    cuda_error_name,
    cuda_error_number,
    describe_exception,
    exception_chain,
    identify_cuda_error,
)
from offlint.probing.errors import ProbeUsageError
from offlint.probing.options import (
    MethodNames,
    ModelConfig,
    ProbeOptions,
    build_options,
    parse_init_args,
    read_pyproject_settings,
)
from offlint.probing.spec import ScenarioSpec
from offlint.probing.target import MODULE_OFFLOADER, ORCHESTRATOR, load_target
from offlint.probing.timing import summarize_h2d_trace

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
DATA = Path(__file__).resolve().parent / "data" / "probe"
# The committed H200 run of the default probe (the newest, by the date in its name).
RECORDED_RUNS = sorted((REPO / "benchmarks" / "results").glob("probe-h200-????-??-??.json"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")

torch = pytest.importorskip("torch")


# --- options -----------------------------------------------------------------------------------


def test_defaults_are_the_heavy_ground_truth_configuration() -> None:
    options = build_options({}, {})
    assert options.model == ModelConfig(16, 4096, "bfloat16", (4096, 2048), 4, 1)
    assert options.model.offloaded_layers == [3, 7, 11, 15]
    assert options.gpus == (0,)
    assert options.target is None


def test_command_line_values_are_converted_and_beat_pyproject(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        textwrap.dedent("""\
        [tool.offlint.probe]
        batch-sizes = [64, 32]
        hidden = 1024
        layers = 8
        gpus = [0, 1]
        wait_method = "acquire"
        init-kwargs = {budget_bytes = 7}
        target = "sub/offloader.py:Loader"
    """)
    )
    settings = read_pyproject_settings(pyproject)
    assert settings["batch-sizes"] == (64, 32)
    assert settings["gpu"] == (0, 1)
    # A file TARGET in pyproject is relative to the pyproject.
    assert settings["target"] == f"{(tmp_path / 'sub/offloader.py').resolve()}:Loader"
    options = build_options({"hidden": "2048", "dtype": "fp16", "gpu": "2"}, settings)
    assert options.model.hidden == 2048  # the command line wins
    assert options.model.layers == 8  # pyproject fills in the rest
    assert options.model.batch_sizes == (64, 32)
    assert options.model.dtype == "float16"
    assert options.gpus == (2,)
    assert options.methods == MethodNames(wait="acquire")
    assert options.init_kwargs == {"budget_bytes": 7}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"batch-sizes": "4096"}, "at least two different batch sizes"),
        ({"batch-sizes": "4096,4096"}, "at least two different batch sizes"),
        ({"batch-sizes": "4096,x"}, "positive integer"),
        ({"gpu": "0,0"}, "listed twice"),
        ({"gpu": "-1"}, "integer >= 0"),
        ({"dtype": "int8"}, "unknown dtype"),
        ({"prefetch": 5}, "more than the 4 offloaded layers"),
        ({"offload-every": 32}, "offloads no layer of 16"),
        ({"tolerance": "0"}, "positive number"),
        ({"wrap-method": "not a name"}, "not a method name"),
    ],
)
def test_bad_options_are_one_clear_line(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ProbeUsageError, match=re.escape(message)):
        build_options(given, {})


def test_unknown_pyproject_key_is_named(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.offlint.probe]\nbatchsizes = [1, 2]\n")
    with pytest.raises(ProbeUsageError, match="unknown key 'batchsizes'"):
        read_pyproject_settings(pyproject)


def test_help_shows_the_real_defaults() -> None:
    """click's defaults are only shown (values the user did not give come from ProbeOptions):
    they must say the same."""
    from offlint.probing.command import _OPTION_KEYS

    defaults = build_options({}, {})
    for parameter in probe_command.params:
        key = _OPTION_KEYS.get(parameter.name or "")
        # (click marks "no default" with a sentinel object of its own)
        if key is None or not isinstance(parameter.default, (bool, int, float, str)):
            continue
        given = build_options({key: parameter.default}, {})
        # (only whether the batch sizes came from the user differs)
        assert replace(given, batch_sizes_given=False) == defaults, parameter.name


def test_init_args_parse_json_values_or_strings() -> None:
    assert parse_init_args(["mode=cpu", "budget=2", "flags=[1, 2]"]) == {
        "mode": "cpu",
        "budget": 2,
        "flags": [1, 2],
    }
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_init_args(["novalue"])


def test_cli_options_reach_the_probe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[ProbeOptions] = []

    def fake_probe(options: ProbeOptions, progress: Any) -> dict[str, Any]:
        seen.append(options)
        raise ProbeUsageError("stop here")

    monkeypatch.setattr("offlint.probing.runner.probe", fake_probe)
    monkeypatch.chdir(tmp_path)  # no pyproject above tmp_path's own
    result = CliRunner().invoke(
        probe_command,
        [
            "--gpu",
            "0,1",
            "--batch-sizes",
            "64,32",
            "--hidden",
            "1024",
            "--no-compile",
            "--init-arg",
            "mode=cpu",
            "--scenario",
            "overlap",
            "--scenario",
            "inline",
        ],
    )
    assert result.exit_code == 2
    assert "offlint probe: error: stop here" in result.output
    options = seen[0]
    assert options.gpus == (0, 1)
    assert options.model.batch_sizes == (64, 32)
    assert options.model.hidden == 1024
    assert options.compile is False
    assert options.init_kwargs == {"mode": "cpu"}
    assert options.scenarios == ("overlap", "inline")


# --- TARGET loading ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["original", "inline", "inline_fixed", "overlap"])
def test_fixtures_load_as_orchestrators_without_a_gpu(name: str) -> None:
    target = load_target(str(FIXTURES / f"sglang_offloader_{name}.py"))
    assert target.cls.__name__ == "Offloader"  # detected: the one orchestrator of the file
    assert target.shape == ORCHESTRATOR
    assert target.methods.wrap == "wrap_modules"
    assert target.methods.post_init == "post_init"
    assert target.source_file == str(FIXTURES / f"sglang_offloader_{name}.py")


def test_a_module_offloader_is_recognised_with_default_names() -> None:
    target = load_target(f"{FIXTURES / 'sglang_offloader_original.py'}:_ModuleOffloader")
    assert target.shape == MODULE_OFFLOADER
    assert (target.methods.prefetch, target.methods.wait, target.methods.release) == (
        "start_onload",
        "wait_and_get_device_tensors",
        "offload",
    )
    assert target.methods.join is None  # the original has no end-of-forward join


def test_the_end_of_forward_join_that_fix_writes_is_found_and_can_be_named() -> None:
    fixed = FIXTURES / "golden/module_offloader_no_owner/out_overlap.py"
    target = load_target(f"{fixed}:_ModuleOffloader")
    assert target.shape == MODULE_OFFLOADER
    assert target.methods.join == "join_pending_copies"
    named = load_target(f"{fixed}:_ModuleOffloader", MethodNames(join="offload"))
    assert named.methods.join == "offload"
    with pytest.raises(ProbeUsageError, match="has no method 'join_all'"):
        load_target(f"{fixed}:_ModuleOffloader", MethodNames(join="join_all"))


def test_module_attr_form_and_custom_method_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DATA))
    names = MethodNames(prefetch="fetch", wait="acquire", release="drop")
    target = load_target("module_offloader:LayerLoader", names)
    assert target.shape == MODULE_OFFLOADER
    assert target.methods.prefetch == "fetch"
    assert load_target("cpu_offloader").cls.__name__ == "CpuOffloader"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{data}/missing.py", "TARGET file not found"),
        ("{data}/broken_import.py", "cannot import TARGET .*ModuleNotFoundError"),
        ("{data}/cpu_offloader.py:Missing", "has no attribute 'Missing'"),
        ("{data}/cpu_offloader.py:helper_function", "is a function, not an offloader class"),
        ("{data}/cpu_offloader.py:NotAnOffloader", "not an offloader in the prefetch/wait shape"),
        ("{data}/two_offloaders.py", "several offloader classes .*FirstOffloader, SecondOffloader"),
        ("{data}/__init__.py", "TARGET file not found"),
        ("no_such_package_xyz.mod:Cls", "cannot import TARGET module 'no_such_package_xyz.mod'"),
    ],
)
def test_target_errors_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(ProbeUsageError, match=message) as caught:
        load_target(spec.format(data=DATA))
    assert "\n" not in str(caught.value)


def test_a_named_method_that_is_missing_is_an_error() -> None:
    with pytest.raises(ProbeUsageError, match="has no method 'prefetch_now'"):
        load_target(
            f"{DATA / 'module_offloader.py'}:LayerLoader",
            MethodNames(prefetch="prefetch_now", wait="acquire"),
        )


def test_cli_exit_2_for_bad_targets_and_constructor_arguments(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(probe_command, [str(DATA / "two_offloaders.py")])
    assert result.exit_code == 2
    assert "several offloader classes" in result.output
    loader = f"{DATA / 'module_offloader.py'}:LayerLoader"
    names = ["--prefetch-method", "fetch", "--wait-method", "acquire"]
    result = runner.invoke(probe_command, [loader, *names])
    assert result.exit_code == 2
    assert "LayerLoader() needs 'budget_bytes'" in result.output
    result = runner.invoke(
        probe_command, [loader, *names, "--init-arg", "budget_bytes=1", "--gpu", "99"]
    )
    assert result.exit_code == 2  # the constructor is fine now; the GPU is not there
    assert "no CUDA device 99:" in result.output


# --- no GPU ------------------------------------------------------------------------------------


def test_no_gpu_is_exit_2_with_one_line() -> None:
    # --gpu 99: no machine has that many, so this holds on GPU machines too.
    completed = subprocess.run(
        [sys.executable, "-m", "offlint.probing", "--demo", "--gpu", "99", "--no-timing"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 2
    lines = [line for line in completed.stderr.splitlines() if line.startswith("offlint probe:")]
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert lines and lines[-1].startswith(
        f"offlint probe: error: no CUDA device 99: {visible} visible"
    )
    assert completed.stdout == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_default_gpu_missing_on_cpu_torch() -> None:
    result = CliRunner().invoke(probe_command, ["--demo"])
    assert result.exit_code == 2
    assert "no CUDA device 0: 0 visible" in result.output


def test_probe_command_imports_neither_torch_nor_libcst() -> None:
    code = (
        "import sys, offlint.probing.command, offlint.probing.runner, "
        "offlint.probing.report; "
        "print(sorted(m for m in ('torch', 'libcst') if m in sys.modules))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert completed.stdout.strip() == "[]"


# --- CUDA error chains -------------------------------------------------------------------------


def test_cuda_error_names_and_numbers() -> None:
    assert cuda_error_name(905) == "cudaErrorStreamCaptureIsolation"
    assert cuda_error_number("cudaErrorCapturedEvent") == 907
    assert identify_cuda_error(
        "CUDA error: operation failed due to a previous error during capture\nCUDA kernel errors "
        "might be asynchronously reported"
    ) == (901, "cudaErrorStreamCaptureInvalidated")
    assert identify_cuda_error(
        "CUDA error: something new\nSearch for `cudaErrorStreamCaptureUnjoined' in "
        "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
    ) == (904, "cudaErrorStreamCaptureUnjoined")
    assert identify_cuda_error("Cannot copy between CPU and CUDA tensors") == (None, None)


def test_the_root_of_a_capture_failure_and_the_users_line(tmp_path: Path) -> None:
    """Reproduce the shape of a failed capture: the user's wait raises 905; the end of the
    capture raises 901 while it propagates. The report names 905 and the user's line."""
    user_file = tmp_path / "user_offloader.py"
    user_file.write_text(
        textwrap.dedent("""\
        import torch

        def wait_and_get_device_tensors():
            raise torch.AcceleratorError(
                "CUDA error: dependency created on uncaptured work in another stream\\n"
                "Search for `cudaErrorStreamCaptureIsolation' in https://docs.nvidia.com/...")
    """)
    )
    namespace: dict[str, Any] = {}
    exec(compile(user_file.read_text(), str(user_file), "exec"), namespace)

    class FakeGraph:
        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            raise torch.AcceleratorError(
                "CUDA error: operation failed due to a previous error during capture"
            )

    try:
        with FakeGraph():
            namespace["wait_and_get_device_tensors"]()
    except Exception as exc:
        surfaced = exc
    assert len(exception_chain(surfaced)) == 2
    described = describe_exception(surfaced, [str(user_file)])
    assert described["chain"][0]["cuda_code"] == 901
    assert described["root"]["cuda_code"] == 905
    assert described["root"]["cuda_name"] == "cudaErrorStreamCaptureIsolation"
    assert described["source"]["file"] == str(user_file)
    assert described["source"]["line"] == 4
    assert described["source"]["function"] == "wait_and_get_device_tensors"
    assert described["source"]["code"].startswith("raise torch.AcceleratorError(")


# --- checks ------------------------------------------------------------------------------------


def _raw(**overrides: Any) -> dict[str, Any]:
    """A minimal passing scenario result in the worker's format."""
    steps = [
        {"phase": phase, "batch": 64, "rel_err": 0.0, "exact": True, "note": "n"}
        for phase in ("eager", "eager_after_capture", "replay", "replay_after_update")
    ]
    raw: dict[str, Any] = {
        "scenario": "target",
        "model": {"batch_sizes": [64, 32]},
        "phases": {},
        "phase_errors": [],
        "steps": steps,
        "capture": {"ok": True, "graphs": [{"batch": 64, "ok": True}], "error": None},
        "host_weights": [{"layer": 3, "bytes": 2**20}, {"layer": 7, "bytes": 2**20}],
        "weight_update": {"layer": 3, "applied": True},
        "timing": {
            "reference_graph": {"64": {"median_ms": 1.0}},
            "eager": {"64": {"median_ms": 1.1}},
            "graph": {"64": {"median_ms": 1.15}},
            "h2d": {"gb_per_s": 2 * 2**20 / 1e9 / 1e-3, "bytes": 2**20, "copy_ms": 0.5},
        },
        "h2d": {
            "per_eager_step": {"64": {"copies": 2.0, "bytes": 2.0 * 2**20, "kinds": {}}},
            "per_replay": {
                "64": {"copies": 2.0, "bytes": 2.0 * 2**20, "kinds": {}},
                "32": {"copies": 2.0, "bytes": 2.0 * 2**20, "kinds": {}},
            },
        },
    }
    raw.update(overrides)
    return raw


def _status(evaluation: dict[str, Any], name: str) -> str:
    return next(c["status"] for c in evaluation["checks"] if c["name"] == name)


def test_a_user_target_passes_when_every_check_passes() -> None:
    evaluation = evaluate_scenario(_raw(), Thresholds(), None)
    assert evaluation["verdict"] == VERDICT_PASS
    derived = evaluation["derived"]["64"]
    assert derived["h2d_ms"] == pytest.approx(1.0)  # 2 MiB at 2 MiB / 1 ms
    assert derived["ideal_ms"] == pytest.approx(1.0)
    assert derived["serial_ms"] == pytest.approx(2.0)
    assert derived["overlap_kept"] == pytest.approx(0.85)
    assert derived["graph_over_eager"] == pytest.approx(1.15 / 1.1)


def test_double_copies_and_stale_eager_fail_a_user_target() -> None:
    raw = _raw()
    raw["h2d"]["per_replay"]["64"]["copies"] = 3.0
    raw["steps"][1]["rel_err"] = 1.0
    raw["steps"][1]["exact"] = False
    evaluation = evaluate_scenario(raw, Thresholds(), None)
    assert evaluation["verdict"] == VERDICT_FAIL
    assert _status(evaluation, H2D_COPIES) == FAIL
    assert _status(evaluation, EAGER_AFTER_CAPTURE) == FAIL
    assert any("3 copies" in problem for problem in evaluation["problems"])


def test_graph_slower_than_the_limit_fails() -> None:
    raw = _raw()
    raw["timing"]["graph"]["64"]["median_ms"] = 2.0
    evaluation = evaluate_scenario(raw, Thresholds(max_graph_slowdown=1.1), None)
    assert _status(evaluation, GRAPH_SPEED) == FAIL
    assert evaluate_scenario(raw, Thresholds(max_graph_slowdown=2.0), None)["verdict"] == (
        VERDICT_PASS
    )


def _failed_capture(code: int | None) -> dict[str, Any]:
    root = {
        "type": "AcceleratorError",
        "message": "m",
        "cuda_code": code,
        "cuda_name": cuda_error_name(code) if code else None,
    }
    return _raw(
        steps=[{"phase": "eager", "batch": 64, "rel_err": 0.0, "exact": True, "note": "n"}],
        capture={
            "ok": False,
            "graphs": [{"batch": 64, "ok": False}],
            "error": {
                "batch": 64,
                "root": root,
                "chain": [root],
                "source": {"file": "f.py", "line": 3, "function": "w", "code": "ev.wait()"},
            },
        },
        h2d={"per_eager_step": {}, "per_replay": {}},
    )


def test_expected_capture_failure_matches_only_with_the_expected_root() -> None:
    expectation = Expectation({CAPTURE: FAIL}, capture_root_error=905)
    as_expected = evaluate_scenario(_failed_capture(905), Thresholds(), expectation)
    assert as_expected["verdict"] == VERDICT_EXPECTED
    wrong_root = evaluate_scenario(_failed_capture(900), Thresholds(), expectation)
    assert wrong_root["verdict"] == VERDICT_UNEXPECTED
    assert "expected root 905" in wrong_root["problems"][0]
    captured = evaluate_scenario(_raw(), Thresholds(), expectation)
    assert captured["verdict"] == VERDICT_UNEXPECTED
    # Checks after a failed capture are skipped, and skipped is not failed for a user target.
    user = evaluate_scenario(_failed_capture(905), Thresholds(), None)
    assert user["verdict"] == VERDICT_FAIL
    assert _status(user, H2D_COPIES) == SKIP


def test_a_crashed_worker_is_an_error() -> None:
    evaluation = evaluate_scenario(
        {"scenario": "x", "worker_error": "boom\nSegfault"}, Thresholds(), None
    )
    assert evaluation["verdict"] == VERDICT_ERROR
    assert evaluation["problems"] == ["Segfault"]


def test_overlap_vs_inline_is_gated_only_where_the_configuration_allows_it() -> None:
    def entry(name: str, graph_ms: float, serial_over_ideal: float) -> dict[str, Any]:
        derived = {"64": {"graph_ms": graph_ms, "serial_over_ideal": serial_over_ideal}}
        return {
            "name": name,
            "raw": {"model": {"batch_sizes": [64, 32]}},
            "evaluation": {"derived": derived},
        }

    heavy = compare_overlap_with_inline(
        entry("overlap", 3.7, 1.73), entry("inline", 6.4, 1.73), 1.6
    )
    assert heavy is not None and heavy["gated"] and heavy["passed"]
    assert heavy["speedup"] == pytest.approx(6.4 / 3.7)
    slow = compare_overlap_with_inline(entry("overlap", 5.0, 1.73), entry("inline", 6.4, 1.73), 1.6)
    assert slow is not None and slow["passed"] is False
    light = compare_overlap_with_inline(entry("overlap", 2.7, 1.2), entry("inline", 3.0, 1.2), 1.6)
    assert light is not None and light["gated"] is False and light["passed"] is None


def test_h2d_copies_are_counted_from_a_profiler_trace() -> None:
    trace = {
        "traceEvents": [
            {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "args": {"bytes": 100}},
            {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "args": {"bytes": 100}},
            {"cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "args": {"bytes": 7}},
            {"cat": "kernel", "name": "HtoD-looking kernel name"},
            {
                "cat": "gpu_memcpy",
                "name": "Memcpy HtoD (Pageable -> Device)",
                "args": {"bytes": 50},
            },
        ]
    }
    summary = summarize_h2d_trace(trace, repeats=1)
    assert summary["copies"] == 3
    assert summary["bytes"] == 250
    assert summary["kinds"]["Memcpy HtoD (Pageable -> Device)"] == 1


# --- the recorded H200 run ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    assert RECORDED_RUNS, "no benchmarks/results/probe-h200-<date>.json committed"
    return json.loads(RECORDED_RUNS[-1].read_text(encoding="utf-8"))


def test_recorded_run_meets_the_issue(recorded: dict[str, Any]) -> None:
    env = recorded["environment"]
    assert "H200" in env["gpu_name"]
    assert env["torch"] and env["cuda"] and env["driver"]
    assert recorded["date"]
    assert recorded["exit_code"] == 0
    scenarios = {s["name"]: s for s in recorded["scenarios"]}
    original = scenarios["original"]["raw"]["capture"]["error"]
    assert original["root"]["cuda_code"] == 905
    assert original["chain"][0]["cuda_code"] == 901
    assert original["source"]["file"].endswith("sglang_offloader_original.py")
    assert original["source"]["code"].split("#")[0].strip() == "self._load_event.wait()"
    for name in ("inline", "overlap"):
        steps = scenarios[name]["raw"]["steps"]
        assert scenarios[name]["raw"]["capture"]["ok"]
        assert all(s["exact"] for s in steps if s["phase"] == "replay")
    eager_after = [
        s for s in scenarios["overlap"]["raw"]["steps"] if s["phase"] == "eager_after_capture"
    ]
    assert eager_after and all(s["exact"] for s in eager_after)
    heavy = scenarios["overlap"]["evaluation"]["derived"]["4096"]
    assert heavy["graph_over_eager"] <= 1.1
    inline_heavy = scenarios["inline"]["evaluation"]["derived"]["4096"]
    assert inline_heavy["graph_ms"] / heavy["graph_ms"] >= 1.6
    (comparison,) = recorded["comparisons"]
    assert comparison["gated"] and comparison["passed"]
    inline_copies = scenarios["inline"]["raw"]["h2d"]["per_replay"]["4096"]["copies"]
    assert inline_copies == len(scenarios["inline"]["raw"]["host_weights"]) + 1 == 5


def test_recorded_run_judges_the_same_today(recorded: dict[str, Any]) -> None:
    """The committed verdicts are what this version's checks say about the measurements."""
    from offlint.probing.runner import rejudge

    again = rejudge(recorded)
    assert again["exit_code"] == recorded["exit_code"]
    assert again["comparisons"] == recorded["comparisons"]
    for now, then in zip(again["scenarios"], recorded["scenarios"], strict=True):
        # JSON keeps floats exactly, so the same arithmetic gives the same numbers.
        assert now["evaluation"] == then["evaluation"], now["name"]


def test_recorded_run_renders_as_tables(recorded: dict[str, Any]) -> None:
    from rich.console import Console

    from offlint.probing.report import render_console, render_json

    console = Console(record=True, width=220, color_system=None)
    render_console(recorded, console)
    text = console.export_text()
    assert "offlint probe: checks" in text
    for name in ("original", "inline", "inline-fixed", "overlap"):
        assert name in text
    assert "905 cudaErrorStreamCaptureIsolation (surfaced as 901" in text
    assert "self._load_event.wait()" in text
    assert "as expected" in text
    assert "exit 0" in text.splitlines()[-1]
    assert json.loads(render_json(recorded)) == recorded


def test_report_marks_an_unexpected_outcome(recorded: dict[str, Any]) -> None:
    from rich.console import Console

    from offlint.probing.report import render_console
    from offlint.probing.runner import finish_document

    document = json.loads(json.dumps(recorded))
    overlap = next(s for s in document["scenarios"] if s["name"] == "overlap")
    replay = next(s for s in overlap["raw"]["steps"] if s["phase"] == "replay")
    replay["rel_err"], replay["exact"] = 0.5, False
    thresholds = Thresholds(
        document["options"]["tolerance"], document["options"]["max_graph_slowdown"]
    )
    overlap["evaluation"] = evaluate_scenario(
        overlap["raw"], thresholds, Expectation.from_json(overlap["expectation"])
    )
    options = build_options({}, {})
    redone = finish_document(document["scenarios"], options)
    assert redone["exit_code"] == 1
    console = Console(record=True, width=220, color_system=None)
    render_console(redone, console)
    text = console.export_text()
    assert "unexpected" in text
    assert "replay: expected pass, got fail" in text


# --- the life cycle, dry-run on the CPU ----------------------------------------------------------


class _FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        self.at = 0.0

    def record(self, stream: object = None) -> None:
        self.at = time.perf_counter()

    def elapsed_time(self, end: _FakeEvent) -> float:
        return (end.at - self.at) * 1e3


class _FakeGraph:
    def replay(self) -> None:
        pass


class _FakeCapture:
    capturing = False

    def __init__(self, graph: _FakeGraph, pool: object = None) -> None:
        pass

    def __enter__(self) -> None:
        _FakeCapture.capturing = True

    def __exit__(self, *exc: object) -> None:
        _FakeCapture.capturing = False


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import offlint.probing.scenario as scenario_module

    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda device: types.SimpleNamespace(name="Fake GPU", major=9, minor=0, total_memory=2**30),
    )
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", _FakeCapture)
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: _FakeCapture.capturing)
    monkeypatch.setattr(
        scenario_module,
        "h2d_bandwidth",
        lambda nbytes, device, warmup, iters: {
            "bytes": float(nbytes),
            "copy_ms": 0.01,
            "gb_per_s": nbytes / 1e-5 / 1e9,
        },
    )
    monkeypatch.setattr(
        scenario_module,
        "count_h2d_copies",
        lambda fn, repeats, keep_trace=None: {
            "copies": 2.0,
            "bytes": 2.0,
            "kinds": {},
            "calls": repeats,
        },
    )


def test_life_cycle_dry_run_on_cpu(fake_cuda: None) -> None:
    from offlint.probing.scenario import ScenarioRun

    spec = ScenarioSpec(
        name="dry",
        target=f"{DATA / 'cpu_offloader.py'}:CpuOffloader",
        model=ModelConfig(
            layers=8, hidden=32, dtype="float32", batch_sizes=(8, 4), offload_every=4, prefetch=1
        ),
        replay_rounds=2,
        warmup_iters=1,
        timing_iters=3,
        compile=True,
    )
    raw = ScenarioRun(spec, device=torch.device("cpu")).run()
    assert raw["phase_errors"] == [], raw["phase_errors"]
    assert raw["phases"]["capture"] == "ok"
    assert raw["target_class"].endswith("CpuOffloader")
    assert [w["layer"] for w in raw["host_weights"]] == [3, 7]
    phases = [step["phase"] for step in raw["steps"]]
    assert phases[:2] == ["eager", "eager"]
    assert "eager_after_capture" in phases
    assert phases.count("replay") == 4  # 2 rounds x 2 batch sizes
    assert all(s["exact"] for s in raw["steps"] if s["phase"].startswith("eager"))
    assert raw["weight_update"]["applied"] is False  # the weights went to meta, not to the host
    assert set(raw["timing"]["graph"]) == {"8", "4"}
    # The faked capture check is a plain lambda, which dynamo traces: one graph, same numbers.
    assert raw["compile"] == {"backend": "eager", "fullgraph": True, "ok": True, "rel_err": 0.0}
    json.dumps(raw)  # the worker's result must be JSON as it is
    evaluation = evaluate_scenario(raw, Thresholds(max_graph_slowdown=100.0), None)
    statuses = {c["name"]: c["status"] for c in evaluation["checks"]}
    assert statuses[EAGER_AFTER_CAPTURE] == PASS
    assert statuses["weight_update"] == SKIP
    derived = derived_timing(raw)
    assert derived["8"]["graph_ms"] is not None


def test_worker_process_reports_a_setup_failure(tmp_path: Path) -> None:
    from offlint.probing.runner import run_worker

    spec = ScenarioSpec(
        name="no-gpu",
        target=f"{DATA / 'cpu_offloader.py'}:CpuOffloader",
        model=ModelConfig(layers=4, hidden=8, batch_sizes=(2, 1)),
        device_index=99,
    )
    raw = run_worker(spec, timeout_s=300)
    assert raw["scenario"] == "no-gpu"
    assert raw["phases"]["setup"] == "failed"
    assert evaluate_scenario(raw, Thresholds(), None)["verdict"] == VERDICT_ERROR


def test_scenarios_are_spread_over_gpus_one_process_per_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from offlint.probing import runner

    running: dict[int, int] = {}
    overlaps: list[int] = []
    lock = threading.Lock()

    started: list[object] = []

    class FakeWorker:
        def __init__(self) -> None:
            started.append(self)

        def close(self) -> None:
            pass

    def fake_run_in(worker: object, spec: ScenarioSpec, timeout_s: float) -> dict[str, Any]:
        with lock:
            running[spec.device_index] = running.get(spec.device_index, 0) + 1
            overlaps.append(running[spec.device_index])
        time.sleep(0.05)
        with lock:
            running[spec.device_index] -= 1
        failed = spec.name == "s1"  # a failed capture: the next scenario gets a fresh process
        return {"scenario": spec.name, "device_index": spec.device_index, "capture": {"ok": not failed}}

    monkeypatch.setattr(runner, "WorkerProcess", FakeWorker)
    monkeypatch.setattr(runner, "run_in", fake_run_in)
    specs = [ScenarioSpec(name=f"s{i}", target="t.py", model=ModelConfig()) for i in range(5)]
    results = runner.run_on_gpus(specs, (0, 3), 10.0, progress=lambda line: None)
    assert [r["scenario"] for r in results] == [f"s{i}" for i in range(5)]  # order kept
    assert {r["device_index"] for r in results} == {0, 3}
    assert max(overlaps) == 1  # never two scenarios on one GPU at once
    # One process per GPU, shared by its scenarios, and a fresh one after the failed capture.
    assert len(started) == 3
