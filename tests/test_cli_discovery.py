"""What `check` looks at, as pre-commit and a ruff user expect: `exclude` applies to files named on
the command line (force-exclude), git's ignore rules are respected while walking, and a named file
that cannot be read is that file's error while every other file is still checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.config import ConfigFinder, DiscoveryOverrides, discovery_overrides
from offlint.discovery import discover

HOST_SYNC = (
    "import torch\n\n\ndef step(x):\n    torch.cuda.synchronize()\n    return x\n\n\n"
    "def capture(x):\n    g = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(g):\n        step(x)\n"
)


def write(path: Path, text: str = "x = 1\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["check", "--no-cache", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def shown(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> list[str]:
    code, out, err = run(cwd, monkeypatch, "--show-files", *args)
    assert code == 0, err
    return out.splitlines()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree (a `.git` folder is what git, and offlint, look for)."""
    (tmp_path / ".git" / "info").mkdir(parents=True)
    write(tmp_path / "pyproject.toml", '[tool.offlint]\nexclude = ["gen", "*_pb2.py"]\n')
    return tmp_path


# ---------------------------------------------------------------- force-exclude


def test_named_excluded_files_are_checked_unless_force_exclude(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "gen" / "bad.py", HOST_SYNC)
    write(repo / "pkg" / "api_pb2.py", HOST_SYNC)
    write(repo / "pkg" / "bad.py", HOST_SYNC)
    # what the pre-commit hook runs: every staged file named, with --force-exclude
    code, out, _ = run(
        repo, monkeypatch, "--output-format", "concise", "--force-exclude", "gen/bad.py", "pkg/api_pb2.py", "pkg/bad.py"
    )
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines()] == ["pkg/bad.py"]
    # by default (as in ruff) a file named on the command line is checked as given
    code, out, _ = run(repo, monkeypatch, "--output-format", "concise", "gen/bad.py", "pkg/api_pb2.py")
    assert (code, sorted({line.split(":")[0] for line in out.splitlines()})) == (1, ["gen/bad.py", "pkg/api_pb2.py"])
    write(repo / "pyproject.toml", '[tool.offlint]\nexclude = ["gen"]\nforce-exclude = true\n')
    assert shown(repo, monkeypatch, "gen/bad.py") == []
    assert shown(repo, monkeypatch, "--no-force-exclude", "gen/bad.py") == ["gen/bad.py"]


def test_only_excluded_files_named_never_says_all_checks_passed(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pre-commit with only excluded files staged: exit 0 (as ruff), but the run says that it
    checked nothing and what excluded the files, never "All checks passed!"."""
    write(repo / "gen" / "bad.py", HOST_SYNC)
    code, out, err = run(repo, monkeypatch, "--force-exclude", "gen/bad.py")
    assert (code, out) == (0, "")
    assert "All checks passed" not in err
    assert err.splitlines() == [
        "No files were checked.",
        "offlint: warning: every file named was excluded by the configuration's `exclude` with --force-exclude "
        "(1 file: gen/bad.py); without --force-exclude they are checked",
    ]
    code, _, err = run(repo, monkeypatch, "-v", "--force-exclude", "gen/bad.py")
    assert "offlint: skipped gen/bad.py: excluded by configuration (--force-exclude; without it, it is checked)" in err


def test_a_named_excluded_folder_is_still_walked(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "gen" / "a.py")
    write(repo / "gen" / "b_pb2.py")
    assert shown(repo, monkeypatch) == []
    # naming it waives that config's `exclude` below it (a nested project's would still apply)
    assert shown(repo, monkeypatch, "gen") == ["gen/a.py", "gen/b_pb2.py"]


# ---------------------------------------------------------------- .gitignore


def test_gitignored_files_and_folders_are_skipped(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / ".gitignore", "# build outputs\nout/\n*_generated.py\nscratch*.py\n!scratch_keep.py\n")
    write(repo / "pkg" / ".gitignore", "local.py\n/only_here.py\n")
    write(repo / ".git" / "info" / "exclude", "mine.py\n")
    for name in (
        "a.py", "out/b.py", "pkg/c_generated.py", "scratch1.py", "scratch_keep.py", "pkg/local.py",
        "pkg/sub/local.py", "pkg/only_here.py", "pkg/sub/only_here.py", "mine.py", "pkg/d.py",
    ):  # fmt: skip
        write(repo / name)
    assert shown(repo, monkeypatch) == ["a.py", "pkg/d.py", "pkg/sub/only_here.py", "scratch_keep.py"]
    every = shown(repo, monkeypatch, "--no-respect-gitignore")
    assert len(every) == 11
    write(repo / "pyproject.toml", '[tool.offlint]\nrespect-gitignore = false\n')
    assert len(shown(repo, monkeypatch)) == 11
    assert len(shown(repo, monkeypatch, "--respect-gitignore")) == 4


def test_deeper_gitignore_wins_and_a_named_file_is_never_gitignored(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / ".gitignore", "*.py\n")
    write(repo / "keep" / ".gitignore", "!*.py\n")
    write(repo / "a.py", HOST_SYNC)
    write(repo / "keep" / "b.py")
    assert shown(repo, monkeypatch) == ["keep/b.py"]
    # git keeps tracking a file a later .gitignore matches: naming it checks it
    code, out, _ = run(repo, monkeypatch, "--output-format", "concise", "a.py")
    assert code == 1 and out.startswith("a.py:5:5: OFL105")


def test_a_named_ignored_folder_is_walked(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / ".gitignore", "vendor/\n")
    write(repo / "vendor" / "lib.py")
    assert shown(repo, monkeypatch) == []
    assert shown(repo, monkeypatch, "vendor") == ["vendor/lib.py"]


def test_gitignore_outside_a_repository_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / ".gitignore", "*.py\n")
    write(tmp_path / "a.py")
    assert shown(tmp_path, monkeypatch) == ["a.py"]


def test_a_nested_repository_starts_afresh(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / ".gitignore", "b.py\n")
    (repo / "sub" / ".git").mkdir(parents=True)
    write(repo / "sub" / "b.py")
    write(repo / "b.py")
    assert shown(repo, monkeypatch) == ["sub/b.py"]


def test_discovery_overrides_reach_a_finder_built_inside_them(repo: Path) -> None:
    write(repo / ".gitignore", "a.py\n")
    write(repo / "a.py")
    with discovery_overrides(DiscoveryOverrides(respect_gitignore=False)):
        files, _ = discover([repo], ConfigFinder(fallback_root=repo), repo)
    assert [f.display for f in files] == ["a.py"]
    files, _ = discover([repo], ConfigFinder(fallback_root=repo), repo)
    assert files == []


def test_fix_honours_force_exclude_too(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = (Path(__file__).resolve().parent.parent / "fixtures" / "golden" / "record_stream" / "in.py").read_text(
        encoding="utf-8"
    )
    write(repo / "gen" / "r.py", source)
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(main, ["fix", "--no-color", "--force-exclude", "gen/r.py"])
    assert (result.exit_code, result.stdout) == (0, "")


# ---------------------------------------------------------------- unreadable named files (issue 15, item 9)


def _deny_opening(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Opening a file whose path ends with `name` fails as an unreadable file does (even as root)."""
    real_open = os.open

    def deny(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if str(path).endswith(name):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", deny)


def test_an_unreadable_named_file_is_its_own_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "a.py", HOST_SYNC)
    write(repo / "locked.py", HOST_SYNC)
    write(repo / "z.py", HOST_SYNC)
    _deny_opening(monkeypatch, "locked.py")
    code, out, err = run(repo, monkeypatch, "--output-format", "concise", "a.py", "locked.py", "z.py")
    assert code == 2
    assert sorted({line.split(":")[0] for line in out.splitlines()}) == ["a.py", "z.py"]
    assert err.splitlines()[0] == "locked.py: unreadable: Permission denied"
    assert "Usage:" not in err


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root: chmod 000 does not stop reads")
def test_a_chmod_000_named_file_is_its_own_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "a.py", HOST_SYNC)
    locked = write(repo / "locked.py", HOST_SYNC)
    locked.chmod(0)
    try:
        code, out, err = run(repo, monkeypatch, "--output-format", "concise", "a.py", "locked.py")
    finally:
        locked.chmod(0o644)
    assert code == 2 and out.startswith("a.py:")
    assert "locked.py: unreadable: Permission denied" in err


def test_a_fifo_and_a_missing_file_named_do_not_stop_the_run(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "a.py", HOST_SYNC)
    os.mkfifo(repo / "pipe.py")
    code, out, err = run(repo, monkeypatch, "--output-format", "concise", "pipe.py", "nope.py", "a.py")
    assert code == 2
    assert out.startswith("a.py:5:5: OFL105")
    assert "nope.py: missing-path: no such file or directory" in err
    assert "pipe.py: unreadable:" in err


def test_fix_goes_on_past_an_unreadable_named_file(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = (Path(__file__).resolve().parent.parent / "fixtures" / "golden" / "record_stream" / "in.py").read_text(
        encoding="utf-8"
    )
    write(repo / "locked.py", source)
    write(repo / "r.py", source)
    _deny_opening(monkeypatch, "locked.py")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(main, ["fix", "--no-color", "locked.py", "r.py"])
    assert result.exit_code == 2
    assert result.stdout.startswith("--- a/r.py\n+++ b/r.py\n")  # the other file is still fixed
    assert "locked.py: unreadable: Permission denied" in result.stderr
    assert "Usage:" not in result.stderr
