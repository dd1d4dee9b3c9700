"""`offlint fix` end to end: diff vs apply, exit codes, atomic writes, errors that stop nothing."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from offlint.analysis.engine import check_source
from offlint.analysis.syntax import walk
from offlint.cli import main
from offlint.diagnostics import ErrorKind, FixSafety
from offlint.fixing import apply as apply_module
from offlint.fixing.apply import Fixer, FixSettings, _check_settings
from offlint.fixing.availability import FIX_AVAILABILITY
from offlint.fixing.edits import Owner, StatementPlan
from offlint.fixing.findings import findings
from offlint.fixing.loop import fix_source
from offlint.fixing.writes import write_if_unchanged

ROOT = Path(__file__).resolve().parent.parent
ORIGINAL = ROOT / "fixtures" / "sglang_offloader_original.py"
RECORD_STREAM = ROOT / "fixtures" / "golden" / "record_stream" / "in.py"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["fix", "--no-color", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(ORIGINAL, tmp_path / "offloader.py")
    shutil.copy(RECORD_STREAM, tmp_path / "prefetch.py")
    (tmp_path / "plain.py").write_text("x = 1\n")
    # an engine that captures whole forwards: the primed overlap is sound there only
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\ncapture-modes = ["whole"]\n')
    return tmp_path


def test_diff_by_default_writes_nothing(work: Path) -> None:
    before = (work / "offloader.py").read_bytes()
    code, out, err = _run(str(work / "offloader.py"))
    assert code == 1
    assert (
        out.startswith("--- a/") and "+        if index + prefetch_step < len(offloaders):" in out
    )
    assert "OFL103" in err and "OFL101" in err
    assert (work / "offloader.py").read_bytes() == before


def test_nothing_to_fix_exits_zero(work: Path) -> None:
    assert _run(str(work / "plain.py"))[0] == 0


def test_apply_writes_and_a_second_apply_is_a_no_op(work: Path) -> None:
    os.chmod(work / "offloader.py", 0o640)
    code, _, _ = _run("--apply", str(work))
    assert code == 0
    fixed = (work / "offloader.py").read_bytes()
    assert (
        b"_on_forward_start" in fixed and b"consumer_stream" in (work / "prefetch.py").read_bytes()
    )
    assert stat.S_IMODE((work / "offloader.py").stat().st_mode) == 0o640
    assert not [p for p in work.iterdir() if p.name.endswith(".offlint-tmp")]
    assert _run("--apply", str(work))[0] == 0
    assert (work / "offloader.py").read_bytes() == fixed
    assert _run(str(work))[0] == 0  # and the diff mode agrees: nothing left


def test_strategy_inline(work: Path) -> None:
    code, out, _ = _run("--strategy", "inline", str(work / "offloader.py"))
    assert code == 1
    assert "return device_tensors" in out and "_on_forward_start" not in out


def test_select_and_ignore(work: Path) -> None:
    code, out, _ = _run("--select", "OFL204", str(work))
    assert code == 1 and "consumer_stream" in out and "_on_forward_start" not in out
    code, out, _ = _run("--ignore", "OFL204", str(work))
    assert "consumer_stream" not in out and "_on_forward_start" in out


def test_json_lists_every_edit_with_its_rule(work: Path) -> None:
    code, out, _ = _run("--output-format", "json", str(work))
    assert code == 1
    payload = json.loads(out)
    files = {f["path"].rsplit("/", 1)[-1]: f for f in payload["files"]}
    assert {e["rule"] for e in files["prefetch.py"]["edits"]} == {"OFL204"}
    assert all(e["safety"] == "safe" for e in files["prefetch.py"]["edits"])
    offloader = files["offloader.py"]
    assert offloader["strategies"] == ["overlap"]
    # one rewrite fixes the pair: each of its edits names every finding it fixes
    assert {"OFL101", "OFL103"} <= {r for e in offloader["edits"] for r in (e["rule"], *e["also_fixes"])}
    assert all(e["line"] > 0 and e["safety"] == "unsafe" for e in offloader["edits"])
    assert offloader["diff"].startswith("--- a/")
    assert payload["summary"]["changed"] == 2


def test_unparsable_file_does_not_stop_the_others(work: Path) -> None:
    # a hazard's words, so that the prefilter lets it through (a file with none is skipped by
    # `check`'s pass over the tree, and `fix` acts on what `check` shows)
    (work / "broken.py").write_text("import torch\n\n\ndef f(:\n    t.record_stream(torch.cuda.current_stream())\n")
    code, _, err = _run("--apply", str(work))
    assert code == 2
    assert "broken.py" in err and "syntax-error" in err
    assert b"_on_forward_start" in (work / "offloader.py").read_bytes()


def test_missing_path_is_an_error(work: Path) -> None:
    assert _run(str(work / "nope.py"))[0] == 2


def test_bom_and_crlf_round_trip(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + RECORD_STREAM.read_bytes().replace(b"\n", b"\r\n")
    path = tmp_path / "crlf.py"
    path.write_bytes(data)
    assert _run("--apply", str(path))[0] == 0
    fixed = path.read_bytes()
    assert fixed.startswith(b"\xef\xbb\xbf")
    assert b"consumer_stream = torch.cuda.current_stream()\r\n" in fixed
    assert b"\n" not in fixed.replace(b"\r\n", b"")


def test_crlf_reaches_the_line_breaks_inside_a_generated_docstring(tmp_path: Path) -> None:
    # the end-of-forward join helper has a multi-line docstring: its line breaks are string bytes,
    # which libcst does not render in the module's style (found by benchmarks/fuzz.py, input 8889)
    source = Path(__file__).resolve().parent.parent / "fixtures/golden/module_offloader_no_owner/in.py"
    path = tmp_path / "crlf.py"
    path.write_bytes(source.read_bytes().replace(b"\n", b"\r\n"))
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\ncapture-modes = ["whole"]\n')
    assert _run("--apply", "--strategy", "overlap", str(path))[0] == 0
    fixed = path.read_bytes()
    assert b'"""End-of-forward join of the offloaders given to\r\n' in fixed
    assert b"\n" not in fixed.replace(b"\r\n", b"")
    assert fixed.replace(b"\r\n", b"\n") == (source.parent / "out_overlap.py").read_bytes()


def test_changed_on_disk_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_bytes(b"new contents\n")
    error = write_if_unchanged(path, "m.py", b"old contents\n", b"fixed\n")
    assert error is not None and error.kind is ErrorKind.CHANGED
    assert path.read_bytes() == b"new contents\n"
    assert write_if_unchanged(path, "m.py", b"new contents\n", b"fixed\n") is None
    assert path.read_bytes() == b"fixed\n"


def test_a_fix_that_would_not_compile_is_not_offered_and_the_next_one_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fixer whose fix of a finding would not compile is not that finding's fix: `check` says
    why, and the next fixer's fix of the same finding is offered and applied by `fix`."""

    def bad_plan(model, settings):  # type: ignore[no-untyped-def]
        plan = StatementPlan()
        for found in findings(model, ("OFL204",), settings.min_confidence):
            line = next(
                n for n in walk(model.module)
                if isinstance(n, cst.SimpleStatementLine) and any(m is found.node for m in walk(n))
            )
            with plan.owning([Owner(found.code, found.node)]):
                plan.insert_before(
                    line, [cst.SimpleStatementLine([cst.Break()])], ("OFL204",), "broken on purpose"
                )
        return plan, []

    broken = Fixer("broken", ("OFL204",), FixSafety.SAFE, bad_plan)
    monkeypatch.setattr(apply_module, "FIXERS", (broken, *apply_module.FIXERS))
    data = RECORD_STREAM.read_bytes()
    settings = FixSettings(select=frozenset({"OFL204"}))
    checked = check_source(data, "m.py", _check_settings(settings), fixes=FIX_AVAILABILITY)
    (finding,) = checked.diagnostics
    assert finding.fix is not None and finding.fix.fixer == "OFL204"
    result = fix_source(data, "m.py", settings)
    assert not result.errors
    assert b"consumer_stream" in result.fixed and b"break" not in result.fixed  # the real OFL204 fix
    compile(result.fixed, "m.py", "exec")


def test_fix_changes_what_check_shows_at_the_same_floor(tmp_path: Path) -> None:
    """An eager `non_blocking` copy from pageable memory in code no capture reaches is a `low`
    OFL106: hidden by `check` and left alone by `fix` at the default floor; both act on it at
    `--min-confidence low`."""
    source = (
        "import torch\n\n\n"
        "def upload(n):\n"
        "    dev = torch.empty(4, 4, device='cuda')\n"
        "    host = torch.empty(4, 4)\n"
        "    dev.copy_(host, non_blocking=True)\n"
        "    return dev\n"
    )
    (tmp_path / "m.py").write_text(source)

    def offlint(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "offlint", *args, "--no-cache" if args[0] == "check" else "--no-color", "m.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )

    assert offlint("check").returncode == 0
    assert offlint("fix").returncode == 0 and offlint("fix").stdout == ""
    low_check = offlint("check", "--min-confidence", "low", "--output-format", "concise")
    assert low_check.returncode == 1 and "OFL106" in low_check.stdout and low_check.stdout.rstrip().endswith("[low]")
    low_fix = offlint("fix", "--min-confidence", "low")
    assert low_fix.returncode == 1 and "+    host = torch.empty(4, 4, pin_memory=True)" in low_fix.stdout
    assert offlint("fix", "--min-confidence", "low", "--apply").returncode == 0
    assert offlint("check", "--min-confidence", "low").returncode == 0  # fixed: nothing left
