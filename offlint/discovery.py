"""Which files a run looks at: `*.py` below the given paths, minus what is never source.

Shared by `check` and `fix`. Paths given explicitly are always taken (as ruff does without
`--force-exclude`); folders are walked without following links (no symlink loops), skipping VCS
and build folders, virtual environments and the configured `exclude` globs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Discovered:
    path: Path
    display: str  # how the path is shown: relative to the working directory when below it


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


def _is_virtualenv(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "pyvenv.cfg"))


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
            files.setdefault(os.path.realpath(given), Discovered(given, shown))
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
    `realpath` per folder (entries tell links apart without a stat each): a warm run on a big
    tree is mostly this walk."""

    def on_error(exc: OSError) -> None:
        where = display_path(Path(exc.filename), cwd) if exc.filename else display_path(root, cwd)
        errors.append(FileError(where, ErrorKind.UNREADABLE, exc.strerror or str(exc)))

    # a folder named on the command line is taken even when its config excludes it (as a file
    # is): that config's `exclude` is then waived below it; nested projects' still apply
    given_config = finder.for_path(root)
    waived = given_config if given_config.is_excluded(root) else None
    cwd_text = str(cwd)
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            on_error(exc)
            continue
        # entries are judged by the config of the folder holding them, so a project's `exclude`
        # also drops a nested project (with its own pyproject.toml) below it
        config = finder.for_path(Path(folder))
        honour = config is not waived and bool(config.exclude)
        real_folder = os.path.realpath(folder)
        shown_folder = _display_folder(folder, real_folder, cwd_text)
        below: list[str] = []
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                full = entry.path
                if name in SKIPPED_DIRS or name.endswith(".egg-info") or _is_virtualenv(full):
                    continue
                if honour and config.is_excluded(Path(full)):
                    continue
                below.append(full)
                continue
            if not name.endswith(".py"):
                continue
            full_path = Path(entry.path)
            real = os.path.join(real_folder, name)
            if entry.is_symlink():
                # folder links are never followed (no loops, no escaping the tree); file links are
                try:
                    points_to_folder = entry.is_dir()
                except OSError:  # a link loop: reported below
                    points_to_folder = False
                if points_to_folder:
                    continue
                if not os.path.exists(full_path):
                    # a dangling link or a link loop: reported, never resolved
                    try:
                        os.stat(full_path)
                    except OSError as exc:
                        reason = exc.strerror or str(exc)
                    else:  # pragma: no cover - it appeared in between
                        reason = "unreadable symbolic link"
                    errors.append(
                        FileError(display_path(full_path, cwd), ErrorKind.UNREADABLE, f"symbolic link: {reason}")
                    )
                    continue
                real = os.path.realpath(full_path)
            if honour and config.is_excluded(full_path):
                continue
            shown = shown_folder + name if shown_folder is not None else display_path(full_path, cwd)
            yield real, Discovered(full_path, shown)
        stack.extend(reversed(below))


def _display_folder(folder: str, real_folder: str, cwd: str) -> str | None:
    """A folder's display prefix (`display_path` of its files, less their names), or None to ask
    `display_path` per file."""
    relative = _below(cwd, os.path.abspath(folder), real_folder)
    if relative is None:
        return None
    return "" if relative == "." else relative + "/"
