"""What a ruff user expects of the command line: NO_COLOR / FORCE_COLOR / TERM=dumb, -q / -v,
--show-settings, --show-files, and a --version that names what decides offlint's behaviour."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import offlint
from offlint.cli import main, use_color, version_text

ANSI = re.compile(r"\x1b\[[0-9;]*m")
HOST_SYNC = (
    "import torch\n\n\ndef step(x):\n    torch.cuda.synchronize()\n    return x\n\n\n"
    "def capture(x):\n    g = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(g):\n        step(x)\n"
)
COLOR_VARIABLES = ("NO_COLOR", "FORCE_COLOR", "TERM")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\nexclude = ["gen"]\n', encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(HOST_SYNC, encoding="utf-8")
    (tmp_path / "pkg" / "clean.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "made.py").write_text(HOST_SYNC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in COLOR_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


# ---------------------------------------------------------------- colour


@pytest.mark.parametrize(
    ("flag", "environ", "terminal", "expected"),
    [
        (None, {}, True, True),
        (None, {}, False, False),
        (None, {"NO_COLOR": "1"}, True, False),
        (None, {"NO_COLOR": ""}, True, True),  # empty means unset (no-color.org)
        (None, {"FORCE_COLOR": "1"}, False, True),
        (None, {"FORCE_COLOR": ""}, False, False),
        (None, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False, False),
        (None, {"TERM": "dumb"}, True, False),
        (None, {"TERM": "dumb", "FORCE_COLOR": "1"}, True, True),
        (True, {"NO_COLOR": "1"}, False, True),  # the flag wins
        (False, {"FORCE_COLOR": "1"}, True, False),
    ],
)
def test_colour_precedence(flag: bool | None, environ: dict[str, str], terminal: bool, expected: bool) -> None:
    assert use_color(flag, terminal, environ) is expected


def test_colour_environment_reaches_the_report(project: Path) -> None:
    coloured = invoke("check", "--no-cache", env={"FORCE_COLOR": "1"}).stdout
    assert ANSI.search(coloured)
    plain = invoke("check", "--no-cache", env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout
    assert not ANSI.search(plain) and plain == ANSI.sub("", coloured)
    assert ANSI.search(invoke("check", "--no-cache", "--color", env={"NO_COLOR": "1"}).stdout)


def test_term_dumb_and_no_color_in_a_real_terminal(project: Path) -> None:
    """A pseudo-terminal: colour by default, none with TERM=dumb or NO_COLOR."""
    pty = pytest.importorskip("pty")

    def through_a_terminal(extra: dict[str, str]) -> str:
        env = {k: v for k, v in os.environ.items() if k not in COLOR_VARIABLES} | {"TERM": "xterm"} | extra
        leader, follower = pty.openpty()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "offlint", "check", "--no-cache", "pkg/bad.py"],
                stdout=follower,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=project,
                timeout=120,
            )
            assert done.returncode == 1
            os.close(follower)
            chunks = []
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(leader)
        return b"".join(chunks).decode("utf-8", "replace")

    assert ANSI.search(through_a_terminal({}))
    assert not ANSI.search(through_a_terminal({"TERM": "dumb"}))
    assert not ANSI.search(through_a_terminal({"NO_COLOR": "1"}))


# ---------------------------------------------------------------- -q / -v


def test_quiet_prints_the_report_only(project: Path) -> None:
    loud = invoke("check", "--no-cache", "--output-format", "concise")
    quiet = invoke("check", "--no-cache", "--output-format", "concise", "-q")
    assert (quiet.exit_code, quiet.stdout) == (loud.exit_code, loud.stdout) == (1, quiet.stdout)
    assert quiet.stdout.startswith("pkg/bad.py:5:5: OFL105")
    assert loud.stderr == "Found 1 error.\n"
    assert quiet.stderr == ""
    clean = invoke("check", "--no-cache", "-q", "pkg/clean.py")
    assert (clean.exit_code, clean.stdout, clean.stderr) == (0, "", "")


def test_quiet_still_reports_files_that_could_not_be_checked(project: Path) -> None:
    result = invoke("check", "--no-cache", "-q", "nope.py", "pkg/clean.py")
    assert (result.exit_code, result.stderr) == (2, "nope.py: missing-path: no such file or directory\n")


def test_verbose_says_which_config_applies_and_how_long(project: Path) -> None:
    result = invoke("check", "--no-cache", "-v", "--force-exclude", "pkg", "gen/made.py")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert f"offlint: config {(project / 'pyproject.toml').resolve()}: 2 files" in lines
    assert "offlint: skipped gen/made.py: excluded by configuration (--force-exclude; without it, it is checked)" in lines
    assert re.fullmatch(
        r"offlint: 2 files checked in \d+\.\d\d s: 1 analysed; 1 without possible hazards \(not parsed\)", lines[-1]
    )


def test_quiet_and_verbose_conflict(project: Path) -> None:
    result = invoke("check", "-q", "-v")
    assert (result.exit_code, result.stderr) == (2, "offlint: error: -q/--quiet and -v/--verbose cannot be combined\n")


# ---------------------------------------------------------------- --show-settings / --show-files


def test_show_files_lists_what_a_check_reads(project: Path) -> None:
    result = invoke("check", "--show-files")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "pkg/bad.py\npkg/clean.py\n", "")
    result = invoke("check", "--show-files", "--force-exclude", "gen/made.py", "pkg/clean.py")
    assert result.stdout == "pkg/clean.py\n"
    named = invoke("check", "--show-files", "gen/made.py", "pkg/clean.py")
    assert named.stdout == "gen/made.py\npkg/clean.py\n"  # named files are checked, as in ruff


def test_show_settings_resolves_config_and_command_line(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.offlint]\nexclude = ["gen"]\nignore = ["OFL105"]\ncapture-reachable = ["step*"]\n'
        '[tool.offlint.per-file-ignores]\n"pkg/*" = ["OFL2"]\n',
        encoding="utf-8",
    )
    result = invoke("check", "--show-settings", "--extend-select", "OFL901", "--min-confidence", "low", "pkg/bad.py")
    assert result.exit_code == 0, result.stderr
    settings = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in result.stdout.splitlines())
    assert settings["config"] == str((project / "pyproject.toml").resolve())
    selected = settings["select"].split(", ")
    assert "OFL901" in selected and "OFL105" not in selected and "OFL101" in selected
    assert not any(code.startswith("OFL2") for code in selected)  # per-file-ignores for this path
    assert settings["min-confidence"] == "low"
    assert settings["capture-reachable"] == "step*"
    assert (settings["force-exclude"], settings["respect-gitignore"]) == ("false", "true")
    no_config = invoke("check", "--show-settings", "--no-respect-gitignore", "--config", "pyproject.toml")
    assert "respect-gitignore  false" in no_config.stdout


def test_show_settings_and_files_check_the_config(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.offlint]\nselct = []\n", encoding="utf-8")
    for flag in ("--show-settings", "--show-files"):
        result = invoke("check", flag)
        assert result.exit_code == 2
        assert "unknown key [tool.offlint] selct (did you mean `select`?)" in result.stderr


# ---------------------------------------------------------------- --version


def test_version_names_offlint_libcst_torch_and_python() -> None:
    from importlib.metadata import version

    lines = invoke("--version").stdout.splitlines()
    assert lines[0] == f"offlint {offlint.__version__}"
    assert lines[1] == f"libcst {version('libcst')}"
    assert lines[2].startswith("torch ")
    assert lines[3] == "python " + ".".join(map(str, sys.version_info[:3]))
    assert invoke("-V").stdout == invoke("--version").stdout


def test_version_says_when_torch_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    real = importlib.metadata.version

    def without_torch(name: str) -> str:
        if name == "torch":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", without_torch)
    assert "torch not installed" in version_text().splitlines()


def test_version_imports_neither_torch_nor_libcst() -> None:
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['offlint', '--version']\n"
        "try:\n    runpy.run_module('offlint', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'libcst')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
