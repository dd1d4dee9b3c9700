"""The fix command line (issue 25, item 6): `check --diff` names an option that writes what it
shows; `fix` honours NO_COLOR; `fix -` and `check --fix -` read stdin and write the fixed source
to stdout (editors), `--stdin-filename` naming it for the config; the check summary counts safe
and unsafe fixes with the command for each."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
SAFE = ROOT / "fixtures" / "group_offload_record_stream.py"  # OFL204: a safe fix
UNSAFE = ROOT / "fixtures" / "capture_hazards_zoo.py"  # OFL101/OFL103: unsafe fixes
ANSI = "\x1b["


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # an engine that captures whole forwards: the zoo's fixes are unsound under the split modes
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\ncapture-modes = ["whole"]\n', encoding="utf-8")
    shutil.copyfile(SAFE, tmp_path / "safe.py")
    shutil.copyfile(UNSAFE, tmp_path / "zoo.py")
    monkeypatch.chdir(tmp_path)
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _run(args: list[str], input: bytes | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, args, input=input, env=env, catch_exceptions=False)


def test_check_diff_closing_line_names_the_option_that_writes_it(project: Path) -> None:
    result = _run(["check", "--diff", "safe.py"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "Would fix 1 file(s) (2 edit(s)); run with --fix to write."
    result = _run(["check", "--diff", "--unsafe-fixes", "zoo.py"])
    assert result.stderr.splitlines()[-1].endswith("run with --fix --unsafe-fixes to write.")
    # and that option does write it
    before = (project / "zoo.py").read_bytes()
    _run(["check", "--fix", "--unsafe-fixes", "zoo.py"])
    assert (project / "zoo.py").read_bytes() != before
    # `fix`'s own diff still names its own option
    shutil.copyfile(UNSAFE, project / "zoo.py")
    assert _run(["fix", "zoo.py"]).stderr.splitlines()[-1].endswith("run with --apply to write.")


def test_fix_honours_no_color(project: Path) -> None:
    assert ANSI in _run(["fix", "zoo.py"], env={"FORCE_COLOR": "1"}).stdout
    assert ANSI in _run(["fix", "--color", "zoo.py"]).stdout
    for env in ({"NO_COLOR": "1"}, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, {"TERM": "dumb"}):
        result = _run(["fix", "zoo.py"], env=env)
        assert "@@" in result.stdout, env
        assert ANSI not in result.stdout, env
    assert ANSI not in _run(["check", "--diff", "--unsafe-fixes", "zoo.py"], env={"NO_COLOR": "1"}).stdout


def test_fix_stdin_writes_the_fixed_source_to_stdout(project: Path) -> None:
    source = (project / "zoo.py").read_bytes()
    result = _run(["fix", "-", "--stdin-filename", "zoo.py"], input=source)
    _run(["fix", "--apply", "--exit-zero", "zoo.py"])
    assert result.stdout_bytes == (project / "zoo.py").read_bytes() != source
    # what was done and what is left: stderr, never mixed into the source
    # the pair's edit names both findings it fixes, at their places: the fork and the wait
    assert "OFL103 (47:9), OFL101 (57:13) [unsafe]" in result.stderr
    assert "OFL105" in result.stderr  # the host sync no fix removes is left ...
    assert result.exit_code == 1  # ... and fails the run, as `fix --apply` does
    assert _run(["fix", "-", "--exit-zero"], input=source).exit_code == 0


def test_fix_stdin_without_a_fix_gives_the_source_back(project: Path) -> None:
    clean = b"import torch\n\n\ndef f(x):\n    return x + 1\n"
    result = _run(["fix", "-"], input=clean)
    assert (result.exit_code, result.stdout_bytes) == (0, clean)
    assert result.stderr == "Nothing to fix.\n"
    # --stdin-filename alone means stdin, as for `check`
    assert _run(["fix", "--stdin-filename", "x.py"], input=clean).stdout_bytes == clean


def test_fix_stdin_diff(project: Path) -> None:
    result = _run(["fix", "-", "--diff", "--stdin-filename", "safe.py"], input=SAFE.read_bytes())
    assert result.exit_code == 1
    assert result.stdout.startswith("--- a/safe.py\n+++ b/safe.py\n")


def test_stdin_filename_picks_the_config(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.offlint]\n[tool.offlint.per-file-ignores]\n"vendored/*" = ["OFL204"]\n', encoding="utf-8"
    )
    source = SAFE.read_bytes()
    assert _run(["fix", "-", "--stdin-filename", "vendored/safe.py"], input=source).stdout_bytes == source
    assert _run(["fix", "-", "--stdin-filename", "mine/safe.py"], input=source).stdout_bytes != source


def test_check_fix_stdin_applies_the_safe_fixes_only(project: Path) -> None:
    result = _run(["check", "--fix", "-", "--stdin-filename", "safe.py"], input=SAFE.read_bytes())
    assert "consumer_stream = torch.cuda.current_stream()" in result.stdout
    assert result.exit_code == 0  # nothing left at the default floor
    zoo = UNSAFE.read_bytes()
    result = _run(["check", "--fix", "-"], input=zoo)
    assert result.stdout_bytes == zoo  # its fixes are unsafe: not applied without --unsafe-fixes
    assert result.exit_code == 1
    assert "-:47:9: OFL103" in result.stderr  # what is left, on stderr
    assert _run(["check", "--fix", "--exit-zero", "-"], input=zoo).exit_code == 0
    result = _run(["check", "--fix", "--unsafe-fixes", "-"], input=zoo)
    assert result.stdout_bytes != zoo
    assert "-:47:9: OFL103" not in result.stderr


def test_the_summary_counts_safe_and_unsafe_fixes_with_the_command_for_each(project: Path) -> None:
    result = _run(["check", "safe.py", "zoo.py", "--no-cache"])
    assert result.stderr.splitlines()[-2].startswith(
        "Found 5 errors (1 fixable with `offlint check --fix`, 2 more with unsafe fixes: "
        "`offlint check --fix --unsafe-fixes`)."
    )
    only_unsafe = _run(["check", "zoo.py", "--no-cache"]).stderr
    assert "(2 with unsafe fixes: `offlint check --fix --unsafe-fixes`)." in only_unsafe
    assert "Found 1 error (1 fixable with `offlint check --fix`)." in _run(["check", "safe.py", "--no-cache"]).stderr
