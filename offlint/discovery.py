"""Which files a run looks at: `*.py` below the given paths, minus what is never source.

Shared by `check` and `fix`. Paths given explicitly are always taken (as ruff does without
`--force-exclude`); folders are walked without following links (no symlink loops), skipping VCS
and build folders, virtual environments and the configured `exclude` globs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from offlint.config import ConfigFinder
from offlint.diagnostics import ErrorKind, FileError

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".offlint_cache",
        "build",
        "dist",
        "node_modules",
        "site-packages",
        ".eggs",
    }
)


class Discovered(NamedTuple):
    """A file to check. A tuple of strings, not Paths: a big tree makes thousands of them."""

    walked: str  # the path as found: a given path, or a given folder joined with names below it
    display: str  # how the path is shown: relative to the working directory when below it
    real: str  # the resolved path (links followed): settings and the cache's stat index use it

    @property
    def path(self) -> Path:
        return Path(self.walked)


def display_path(path: Path, cwd: Path) -> str:
    # a link is shown by its own name (not its target's) when it lies below cwd
    # os.path.realpath, unlike Path.resolve on 3.10/3.11, never raises on a symlink loop
    relative = _below(str(cwd), os.path.abspath(path), os.path.realpath(path))
    return relative if relative is not None else path.as_posix()


def _below(cwd: str, *candidates: str) -> str | None:
    """The first candidate (an absolute path) relative to `cwd`, `.` for cwd itself; None when
    none lies below it."""
    root = cwd.rstrip("/") + "/"
    for candidate in candidates:
        if candidate == cwd:
            return "."
        if candidate.startswith(root):
            return candidate[len(root) :]
    return None


def discover(
    paths: list[Path], finder: ConfigFinder, cwd: Path
) -> tuple[list[Discovered], list[FileError]]:
    files: dict[str, Discovered] = {}
    errors: list[FileError] = []
    for given in paths:
        shown = display_path(given, cwd)
        if not given.exists() and not given.is_symlink():
            errors.append(FileError(shown, ErrorKind.MISSING, "no such file or directory"))
            continue
        if given.is_file():
            real = os.path.realpath(given)
            files.setdefault(real, Discovered(str(given), shown, real))
            continue
        if not given.is_dir():
            errors.append(FileError(shown, ErrorKind.UNREADABLE, "not a file or directory (broken link?)"))
            continue
        for real, found in _walk(given, finder, errors, cwd):
            files.setdefault(real, found)
    ordered = sorted(files.values(), key=lambda d: d.display)
    return ordered, errors


def _walk(root: Path, finder: ConfigFinder, errors: list[FileError], cwd: Path) -> Iterator[tuple[str, Discovered]]:
    """(real path, file) for every `*.py` below `root`. One `scandir` per folder and one
    `realpath` per walk: folder links are never followed, so a folder's real path is its
    parent's plus its name, and entries tell links apart without a stat each. A warm run on a
    big tree is mostly this walk."""

    def on_error(exc: OSError) -> None:
        where = display_path(Path(exc.filename), cwd) if exc.filename else display_path(root, cwd)
        errors.append(FileError(where, ErrorKind.UNREADABLE, exc.strerror or str(exc)))

    # a folder named on the command line is taken even when its config excludes it (as a file
    # is): that config's `exclude` is then waived below it; nested projects' still apply
    real_root = os.path.realpath(root)
    given_config = finder.for_real_folder(real_root)
    waived = given_config if given_config.is_excluded(root) else None
    cwd_text = str(cwd)
    root_text = str(root)
    stack = [(root_text, real_root)]
    while stack:
        folder, real_folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            on_error(exc)
            continue
        if folder != root_text and any(entry.name == "pyvenv.cfg" for entry in entries):
            continue  # a virtual environment below the given folder
        # entries are judged by the config of the folder holding them, so a project's `exclude`
        # also drops a nested project (with its own pyproject.toml) below it
        config = finder.for_real_folder(real_folder)
        honour = config is not waived and bool(config.exclude)
        shown_folder = _display_folder(folder, real_folder, cwd_text)
        below: list[tuple[str, str]] = []
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                full = entry.path
                if name in SKIPPED_DIRS or name.endswith(".egg-info"):
                    continue
                if honour and config.is_excluded(Path(full)):
                    continue
                below.append((full, os.path.join(real_folder, name)))
                continue
            if not name.endswith(".py"):
                continue
            full = entry.path
            real = os.path.join(real_folder, name)
            if entry.is_symlink():
                # folder links are never followed (no loops, no escaping the tree); file links are
                try:
                    points_to_folder = entry.is_dir()
                except OSError:  # a link loop: reported below
                    points_to_folder = False
                if points_to_folder:
                    continue
                if not os.path.exists(full):
                    # a dangling link or a link loop: reported, never resolved
                    try:
                        os.stat(full)
                    except OSError as exc:
                        reason = exc.strerror or str(exc)
                    else:  # pragma: no cover - it appeared in between
                        reason = "unreadable symbolic link"
                    errors.append(
                        FileError(display_path(Path(full), cwd), ErrorKind.UNREADABLE, f"symbolic link: {reason}")
                    )
                    continue
                real = os.path.realpath(full)
            if honour and config.is_excluded(Path(full)):
                continue
            if shown_folder is not None:
                shown = shown_folder + name
            elif entry.is_symlink():
                shown = display_path(Path(full), cwd)  # its target may lie below cwd
            else:
                # neither its folder nor it lies below cwd: shown as walked (`str(root)` is
                # normalised, so this is `Path(full).as_posix()` without building a Path)
                shown = full if os.sep == "/" else Path(full).as_posix()
            yield real, Discovered(full, shown, real)
        stack.extend(reversed(below))


def _display_folder(folder: str, real_folder: str, cwd: str) -> str | None:
    """A folder's display prefix (`display_path` of its files, less their names), or None when
    the folder lies outside cwd (its files are then shown as given, links aside)."""
    relative = _below(cwd, os.path.abspath(folder), real_folder)
    if relative is None:
        return None
    return "" if relative == "." else relative + "/"
