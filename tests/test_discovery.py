"""Which files a run looks at (offlint/discovery.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from offlint.config import ConfigFinder
from offlint.diagnostics import ErrorKind
from offlint.discovery import SKIPPED_DIRS, discover, display_path


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n", encoding="utf-8")


def found(
    root: Path, *paths: str | Path, cwd: Path | None = None
) -> tuple[list[str], list[tuple[str, ErrorKind]]]:
    cwd = (cwd or root).resolve()
    given = [Path(p) if Path(p).is_absolute() else cwd / p for p in paths] or [cwd]
    files, errors = discover(given, ConfigFinder(fallback_root=cwd), cwd)
    return [f.display for f in files], [(e.path, e.kind) for e in errors]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.offlint]\n", encoding="utf-8")
    return tmp_path


def test_recurses_into_python_files_only_sorted(tree: Path) -> None:
    touch(tree, "b.py", "a.py", "pkg/sub/c.py", "pkg/d.pyi", "pkg/e.txt", "pkg/f.py.bak", "script")
    assert found(tree) == (["a.py", "b.py", "pkg/sub/c.py"], [])


@pytest.mark.parametrize(
    "folder",
    [
        ".git",
        ".hg",
        ".venv",
        "venv",
        ".tox",
        "__pycache__",
        ".mypy_cache",
        "build",
        "dist",
        "node_modules",
        "site-packages",
        "pkg.egg-info",
        ".offlint_cache",
    ],
)
def test_skips_vcs_build_and_environment_folders(tree: Path, folder: str) -> None:
    touch(tree, "keep.py", f"{folder}/skipped.py", f"pkg/{folder}/deep/skipped.py")
    assert found(tree) == (["keep.py"], [])


def test_every_skipped_folder_name_is_skipped(tree: Path) -> None:
    touch(tree, "keep.py", *(f"{name}/x.py" for name in SKIPPED_DIRS))
    assert found(tree) == (["keep.py"], [])


def test_skips_any_virtualenv_by_its_pyvenv_cfg(tree: Path) -> None:
    touch(tree, "keep.py", "myenv/lib/python3.11/site.py")
    (tree / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    touch(tree, "notenv/lib/mod.py")
    assert found(tree) == (["keep.py", "notenv/lib/mod.py"], [])


def test_configured_exclude_globs(tree: Path) -> None:
    (tree / "pyproject.toml").write_text(
        '[tool.offlint]\nexclude = ["gen", "vendor/**", "*_pb2.py", "pkg/legacy/*.py"]\n',
        encoding="utf-8",
    )
    touch(
        tree,
        "keep.py",
        "gen/a.py",
        "pkg/gen/b.py",
        "vendor/lib/c.py",
        "pkg/api_pb2.py",
        "pkg/legacy/old.py",
        "pkg/legacy_keep.py",
    )
    assert found(tree) == (["keep.py", "pkg/legacy_keep.py"], [])


def test_explicit_files_are_taken_unless_excluded(tree: Path) -> None:
    # force-exclude (off by default, as in ruff): `exclude` applies to named files too; skipped
    # folders (`build`) and extensions are no exclusion of the user's
    (tree / "pyproject.toml").write_text('[tool.offlint]\nexclude = ["gen"]\nforce-exclude = true\n', encoding="utf-8")
    touch(tree, "gen/a.py", "build/b.py", "tool")
    assert found(tree, "gen/a.py", "build/b.py", "tool") == (["build/b.py", "tool"], [])
    (tree / "pyproject.toml").write_text('[tool.offlint]\nexclude = ["gen"]\n', encoding="utf-8")
    assert found(tree, "gen/a.py", "build/b.py", "tool") == (["build/b.py", "gen/a.py", "tool"], [])


@pytest.mark.parametrize("pattern", ["gen", "gen/", "gen/*", "gen/**", "*/gen", "*/gen/**"])
def test_an_explicit_excluded_folder_is_taken(tree: Path, pattern: str) -> None:
    (tree / "pyproject.toml").write_text(
        f'[tool.offlint]\nexclude = ["{pattern}"]\n', encoding="utf-8"
    )
    target = "pkg/gen" if pattern.startswith("*/") else "gen"
    touch(tree, "keep.py", f"{target}/a.py", f"{target}/deep/b.py")
    assert found(tree) == (["keep.py"], [])
    assert found(tree, target) == ([f"{target}/a.py", f"{target}/deep/b.py"], [])
    assert found(tree, f"{target}/deep") == ([f"{target}/deep/b.py"], [])


def test_explicit_folder_keeps_exclusions_below_it(tree: Path) -> None:
    (tree / "pyproject.toml").write_text(
        '[tool.offlint]\nexclude = ["*_pb2.py", "pkg/gen"]\n', encoding="utf-8"
    )
    touch(tree, "pkg/a.py", "pkg/api_pb2.py", "pkg/gen/b.py")
    assert found(tree, "pkg") == (["pkg/a.py"], [])


def test_a_project_excludes_a_nested_project(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.offlint]\nexclude = ["vendor"]\n', encoding="utf-8")
    touch(tree, "src/a.py", "vendor/lib/b.py")
    (tree / "vendor" / "pyproject.toml").write_text(
        '[tool.offlint]\nselect = ["ALL"]\n', encoding="utf-8"
    )
    assert found(tree) == (["src/a.py"], [])
    # named on the command line, the nested project is checked under its own config
    assert found(tree, "vendor") == (["vendor/lib/b.py"], [])


def test_a_nested_project_excludes_its_own_globs(tree: Path) -> None:
    touch(tree, "a.py", "sub/gen/b.py", "sub/c.py", "gen/d.py")
    (tree / "sub" / "pyproject.toml").write_text(
        '[tool.offlint]\nexclude = ["gen"]\n', encoding="utf-8"
    )
    assert found(tree) == (["a.py", "gen/d.py", "sub/c.py"], [])


def test_duplicates_are_checked_once(tree: Path) -> None:
    touch(tree, "pkg/a.py", "pkg/b.py")
    files, errors = found(tree, "pkg", "pkg/a.py", "pkg/../pkg/a.py", ".")
    assert (files, errors) == (["pkg/a.py", "pkg/b.py"], [])


def test_missing_path_is_an_error_and_the_rest_is_still_found(tree: Path) -> None:
    touch(tree, "a.py")
    assert found(tree, "nope.py", "a.py", "missing/dir") == (
        ["a.py"],
        [("nope.py", ErrorKind.MISSING), ("missing/dir", ErrorKind.MISSING)],
    )


def test_broken_link_given_explicitly_is_an_error(tree: Path) -> None:
    (tree / "dangling.py").symlink_to(tree / "gone.py")
    assert found(tree, "dangling.py") == ([], [("dangling.py", ErrorKind.UNREADABLE)])


def test_folder_links_are_not_followed(tree: Path) -> None:
    touch(tree, "pkg/a.py", "elsewhere/b.py")
    (tree / "pkg" / "loop").symlink_to(tree / "pkg", target_is_directory=True)
    (tree / "pkg" / "out").symlink_to(tree / "elsewhere", target_is_directory=True)
    assert found(tree, "pkg") == (["pkg/a.py"], [])


def test_file_links_are_taken_once(tree: Path) -> None:
    touch(tree, "pkg/a.py")
    (tree / "pkg" / "alias.py").symlink_to(tree / "pkg" / "a.py")
    files, errors = found(tree, "pkg")
    assert len(files) == 1 and files[0] in ("pkg/a.py", "pkg/alias.py")
    assert errors == []


@pytest.mark.skipif(
    os.geteuid() == 0 if hasattr(os, "geteuid") else True,
    reason="root reads folders without the read bit",
)
def test_unreadable_folder_is_an_error(tree: Path) -> None:
    touch(tree, "a.py", "locked/b.py")
    (tree / "locked").chmod(0)
    try:
        assert found(tree) == (["a.py"], [("locked", ErrorKind.UNREADABLE)])
    finally:
        (tree / "locked").chmod(0o755)


def test_display_paths(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    touch(tmp_path, "work/pkg/a.py", "outside/b.py")
    assert display_path(cwd / "pkg" / "a.py", cwd.resolve()) == "pkg/a.py"
    outside = tmp_path / "outside" / "b.py"
    assert display_path(outside, cwd.resolve()) == outside.as_posix()
    files, _ = found(cwd, ".", str(outside), cwd=cwd)
    assert files == sorted(["pkg/a.py", outside.as_posix()])


def test_dangling_link_found_while_walking_is_an_error(tree: Path) -> None:
    touch(tree, "pkg/a.py")
    (tree / "pkg" / "dangling.py").symlink_to(tree / "pkg" / "gone.py")
    files, errors = found(tree)
    assert files == ["pkg/a.py"]
    assert errors == [("pkg/dangling.py", ErrorKind.UNREADABLE)]
