"""`offlint probe --entry`, its setup errors and the command's plumbing, without a GPU: the
build() protocol, one-line setup errors with the user's file and line (exit 2), the worker's
timeouts killing the whole process group, output formats, --trace and --sanitize's command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from offlint.probing.command import probe_command
from offlint.probing.entry import (
    ProbedModel,
    bundled_entry_names,
    check_build_arguments,
    load_entry,
    normalize,
    resolve_entry_spec,
)
from offlint.probing.errors import ProbeUsageError, one_line
from offlint.probing.options import ProbeOptions

REPO = Path(__file__).resolve().parent.parent
RECORDED = sorted((REPO / "benchmarks" / "results").glob("probe-h200-????-??-??.json"))

torch = pytest.importorskip("torch")


def _model(x: Any) -> Any:
    return x


def _inputs(batch: int) -> Any:
    return batch


# --- the protocol ------------------------------------------------------------------------------


def test_build_may_return_an_object_a_mapping_or_a_tuple() -> None:
    probed = ProbedModel(_model, _inputs, batch_sizes=(8, 4))
    assert normalize(probed, "b") is probed
    from_dict = normalize({"model": _model, "make_inputs": _inputs, "expected_copies": 3}, "b")
    assert from_dict.expected_copies == 3 and from_dict.reference is None
    from_tuple = normalize((_model, _inputs, _model), "b")
    assert from_tuple.reference is _model
    with pytest.raises(ProbeUsageError, match="expected an object or dict with 'model'"):
        normalize({"model": _model}, "b")
    with pytest.raises(ProbeUsageError, match="at least two different sizes"):
        normalize(ProbedModel(_model, _inputs, batch_sizes=(8, 8)), "b")


def test_bundled_examples_are_found_by_name() -> None:
    names = bundled_entry_names()
    for name in ("group-offload", "prefetch-offload", "sglang-offload", "accelerate-offload"):
        assert name in names
    spec = resolve_entry_spec("group-offload")
    assert spec.endswith("offlint/probing/examples/group_offload.py:build")
    assert resolve_entry_spec("pkg.mod:make") == "pkg.mod:make"
    entry = load_entry(spec)  # importing an example does no CUDA work
    assert entry.label == "group_offload.py:build"


def test_build_arguments_are_checked_before_any_gpu_work() -> None:
    entry = load_entry(resolve_entry_spec("group-offload"))
    check_build_arguments(entry, {"variant": "outside"})
    with pytest.raises(ProbeUsageError, match="takes no argument 'nope'"):
        check_build_arguments(entry, {"nope": 1})


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "import os\nRUN_ID = os.environb[b'SGLANG_RUN_ID']\ndef build(): pass\n",
            "KeyError: b'SGLANG_RUN_ID' (at {file}:2)",
        ),
        ("import sys\nsys.exit(3)\n", "SystemExit: 3 (at {file}:2)"),
        (
            "import no_such_module_xyz\n",
            "ModuleNotFoundError: No module named 'no_such_module_xyz'",
        ),
        ("x = 1\n", "has no 'build'"),
    ],
)
def test_setup_errors_in_the_users_module_are_one_line_with_the_line(
    tmp_path: Path, source: str, message: str
) -> None:
    user = tmp_path / "user_model.py"
    user.write_text(source)
    with pytest.raises(ProbeUsageError) as caught:
        load_entry(f"{user}:build")
    assert message.format(file=user) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_one_line_names_the_users_frame_not_the_standard_librarys(tmp_path: Path) -> None:
    user = tmp_path / "env_user.py"
    user.write_text("import os\n\ndef read():\n    return os.environ['NOT_SET_FOR_SURE_XYZ']\n")
    namespace: dict[str, Any] = {}
    exec(compile(user.read_text(), str(user), "exec"), namespace)
    try:
        namespace["read"]()
    except KeyError as exc:
        assert one_line(exc) == f"KeyError: 'NOT_SET_FOR_SURE_XYZ' (at {user}:4)"


# --- the command -------------------------------------------------------------------------------


def _probe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "offlint.probing", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_missing_environment_variable_at_import_is_a_setup_error(tmp_path: Path) -> None:
    user = tmp_path / "engine.py"
    user.write_text("import os\nRUN_ID = os.environb[b'SGLANG_RUN_ID']\ndef build(): pass\n")
    completed = _probe("--entry", str(user), cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr
    (line,) = [ln for ln in completed.stderr.splitlines() if ln.startswith("offlint probe:")]
    assert line == (
        f"offlint probe: error: cannot import --entry {user}: KeyError: b'SGLANG_RUN_ID' "
        f"(at {user}:2)"
    )
    assert "Traceback" not in completed.stderr


def test_entry_and_target_together_are_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(probe_command, ["x.py", "--entry", "group-offload"])
    assert result.exit_code == 2
    assert "not both" in result.output


def test_a_hang_at_import_times_out_and_kills_the_process_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The TARGET is imported in the worker, never in this process; a hang there is a setup
    error after the setup timeout, and what the import started dies with the worker."""
    from offlint.probing import runner

    pid_file = tmp_path / "child.pid"
    target = tmp_path / "hangs.py"
    target.write_text(
        textwrap.dedent(f"""\
        import subprocess, time
        child = subprocess.Popen(["sleep", "300"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(300)
        """)
    )
    # (long enough for the worker to import torch on a loaded machine)
    monkeypatch.setattr(runner, "SETUP_TIMEOUT_S", 25.0)
    options = ProbeOptions(target=str(target))
    started = time.monotonic()
    with pytest.raises(ProbeUsageError, match="importing it timed out after 25 s"):
        runner.probe(options, progress=lambda line: None)
    assert time.monotonic() - started < 120
    assert not [name for name in sys.modules if name.endswith("hangs_py")]  # never imported here
    child = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the import's child process {child} outlived the timeout")


def test_without_torch_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from offlint.probing import runner

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ProbeUsageError, match=r"pip install 'offlint\[probe\]'"):
        runner.check_torch()


@pytest.fixture
def recorded_probe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[ProbeOptions]:
    assert RECORDED
    document = json.loads(RECORDED[-1].read_text(encoding="utf-8"))
    seen: list[ProbeOptions] = []

    def fake_probe(options: ProbeOptions, progress: Any) -> dict[str, Any]:
        seen.append(options)
        return document

    monkeypatch.setattr("offlint.probing.runner.probe", fake_probe)
    monkeypatch.chdir(tmp_path)
    return seen


def test_output_format_and_file_work_as_in_check(
    recorded_probe: list[ProbeOptions], tmp_path: Path
) -> None:
    runner = CliRunner()
    as_json = runner.invoke(probe_command, ["--demo", "--output-format", "json"])
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["schema"] == "offlint-probe/1"
    old_flag = runner.invoke(probe_command, ["--demo", "--json"])
    assert json.loads(old_flag.stdout)["schema"] == "offlint-probe/1"
    runner.invoke(probe_command, ["--demo", "-o", str(tmp_path / "run.json")])
    assert json.loads((tmp_path / "run.json").read_text())["exit_code"] == 0
    text = runner.invoke(probe_command, ["--demo", "--output-file", str(tmp_path / "run.txt")])
    assert "offlint probe: checks" in (tmp_path / "run.txt").read_text()
    assert "offlint probe: checks" not in text.stdout
    legacy = runner.invoke(probe_command, ["--demo", "--output", str(tmp_path / "old.json")])
    assert "offlint probe: checks" in legacy.stdout  # the old flag kept its meaning
    assert json.loads((tmp_path / "old.json").read_text())["exit_code"] == 0


def test_entry_trace_and_compile_reach_the_probe(
    recorded_probe: list[ProbeOptions], tmp_path: Path
) -> None:
    CliRunner().invoke(
        probe_command,
        ["--entry", "group-offload", "--trace", "traces", "--compile", "--no-watch"],
    )
    options = recorded_probe[-1]
    assert options.entry == "group-offload"
    assert options.trace_dir == str((tmp_path / "traces").resolve())
    assert options.compile is True and options.watch is False
    CliRunner().invoke(probe_command, ["--demo"])
    assert recorded_probe[-1].compile is False  # opt-in: it costs seconds per scenario


def test_no_target_named_anywhere_fails_with_how_to_name_one(
    recorded_probe: list[ProbeOptions], tmp_path: Path
) -> None:
    """`offlint probe --gpu 0` (the CI recipe's command) in a project that names no model fails
    before any GPU work, saying where to name it; the bundled fixtures run only by name."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n', encoding="utf-8")
    result = CliRunner().invoke(probe_command, ["--gpu", "0"])
    assert result.exit_code == 2 and recorded_probe == []
    (line,) = result.stderr.splitlines()
    assert line.startswith("offlint probe: error: no model to probe:")
    assert '[tool.offlint.probe] entry = "pkg.module:build"' in line and "--demo" in line
    assert CliRunner().invoke(probe_command, ["--demo", "--gpu", "0"]).exit_code == 0
    assert recorded_probe[-1].entry is None and recorded_probe[-1].target is None
    both = CliRunner().invoke(probe_command, ["--demo", "--entry", "group-offload"])
    assert both.exit_code == 2 and "--demo runs the bundled fixtures" in both.stderr


def test_the_project_model_named_in_pyproject_is_what_ci_probes(
    recorded_probe: list[ProbeOptions], tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.offlint.probe]\nentry = "mypkg.model:build"\ncapture-mode = "pieces"\n'
        'batch-sizes = [8, 4]\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(probe_command, ["--gpu", "0"])
    assert result.exit_code == 0, result.output
    options = recorded_probe[-1]
    assert options.entry == "mypkg.model:build" and options.capture_mode == "pieces"
    assert options.model.batch_sizes == (8, 4) and options.batch_sizes_given


def test_the_compile_line_says_what_it_means() -> None:
    from offlint.probing.report import compile_line

    broken = compile_line(
        {"ok": False, "reason": "torch.* op returned non-Tensor", "source": None}
    ).plain
    assert "not a capture failure" in broken and "graph break" in broken and "OFL301" in broken
    assert "keeps it compiled" in compile_line({"ok": True}).plain


# --- --sanitize ----------------------------------------------------------------------------------


def test_sanitize_runs_python_programs_only() -> None:
    from offlint.probing.sanitize_command import sanitized_command

    assert sanitized_command(["python3", "run.py", "--x"], "r.json") == [
        "python3",
        "-m",
        "offlint.probing.sanitize_main",
        "--report",
        "r.json",
        "run.py",
        "--x",
    ]
    assert sanitized_command(["run.py"], "r.json")[0] == sys.executable
    with pytest.raises(ProbeUsageError, match="must start with python"):
        sanitized_command(["bash", "run.sh"], "r.json")


def test_sanitize_passes_the_programs_status_through(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import torch, sys\nprint('ran', torch.ones(2).sum().item())\nsys.exit(3)\n")
    report = tmp_path / "report.json"
    completed = _probe(
        "--sanitize", "-o", str(report), "--", sys.executable, str(script), cwd=tmp_path
    )
    assert completed.returncode == 3, completed.stderr
    assert "ran 2.0" in completed.stdout
    document = json.loads(report.read_text())
    assert document["violations"] == [] and document["exit_status"] == 3


def test_a_crash_in_native_code_names_the_signal_and_the_python_line(tmp_path: Path) -> None:
    """A SIGSEGV in the worker (a compiled graph, a driver) leaves no exception to report: the
    worker runs with faulthandler on, and the probe names the signal and the user's line."""
    from offlint.probing import runner

    target = tmp_path / "crashes.py"
    target.write_text("import ctypes\n\n\ndef build():\n    return None\n\n\nctypes.string_at(0)\n")
    with pytest.raises(ProbeUsageError) as raised:
        runner.probe(ProbeOptions(target=str(target)), progress=lambda line: None)
    message = str(raised.value)
    assert "killed by SIGSEGV" in message
    assert f"{target}:8 in <module>" in message
    assert "\n" not in message


def test_races_goes_with_sanitize_and_reaches_the_sanitized_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from offlint.probing import sanitize_command

    alone = CliRunner().invoke(probe_command, ["--races"])
    assert alone.exit_code == 2
    assert "--races goes with --sanitize" in alone.output

    asked: list[bool] = []

    def run_sanitized(command: list[str], timeout_s: float | None, races: bool = False) -> tuple[int, dict[str, Any]]:
        asked.append(races)
        return 0, {"violations": [], "command": command}

    monkeypatch.setattr(sanitize_command, "run_sanitized", run_sanitized)
    for flags, expected in ((["--sanitize", "--races"], True), (["--sanitize"], False)):
        result = CliRunner().invoke(probe_command, [*flags, "--output-format", "json", "--", "python", "x.py"])
        assert result.exit_code == 0, result.output
        assert asked[-1] is expected


def test_several_capture_modes_run_once_each(recorded_probe: list[ProbeOptions], tmp_path: Path) -> None:
    """`capture-mode = ["whole", "pieces"]` under [tool.offlint.probe] (what CI reads): one run
    per mode, the worst exit status; json holds each run under its mode."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.offlint.probe]\nentry = "mypkg.model:build"\ncapture-mode = ["whole", "pieces"]\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(probe_command, ["--gpu", "0", "--output-format", "json"])
    assert result.exit_code == 0, result.output
    assert [o.capture_mode for o in recorded_probe] == ["whole", "pieces"]
    assert all(o.capture_modes == () and o.entry == "mypkg.model:build" for o in recorded_probe)
    document = json.loads(result.stdout)
    assert document["schema"] == "offlint-probe-modes/1" and document["capture_modes"] == ["whole", "pieces"]
    assert [run["schema"] for run in document["runs"]] == ["offlint-probe/1"] * 2
    text = CliRunner().invoke(probe_command, ["--capture-mode", "whole,segmented-vllm"])
    assert "capture mode: segmented-vllm" in text.stdout and recorded_probe[-1].capture_mode == "segmented-vllm"
    bad = CliRunner().invoke(probe_command, ["--capture-mode", "whole,halves"])
    assert bad.exit_code == 2 and "halves" in bad.stderr
