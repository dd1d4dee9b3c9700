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
    try:
        return path.resolve().relative_to(cwd).as_posix()
    except ValueError:
        return path.as_posix()


def _is_virtualenv(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "pyvenv.cfg"))


def discover(
    paths: list[Path], finder: ConfigFinder, cwd: Path
) -> tuple[list[Discovered], list[FileError]]:
    files: dict[Path, Discovered] = {}
    errors: list[FileError] = []
    for given in paths:
        shown = display_path(given, cwd)
        if not given.exists() and not given.is_symlink():
            errors.append(FileError(shown, ErrorKind.MISSING, "no such file or directory"))
            continue
        if given.is_file():
            files.setdefault(given.resolve(), Discovered(given, shown))
            continue
        if not given.is_dir():
            errors.append(FileError(shown, ErrorKind.UNREADABLE, "not a file or directory (broken link?)"))
            continue
        for found in _walk(given, finder, errors, cwd):
            files.setdefault(found.resolve(), Discovered(found, display_path(found, cwd)))
    ordered = sorted(files.values(), key=lambda d: d.display)
    return ordered, errors


def _walk(root: Path, finder: ConfigFinder, errors: list[FileError], cwd: Path) -> Iterator[Path]:
    def on_error(exc: OSError) -> None:
        where = display_path(Path(exc.filename), cwd) if exc.filename else display_path(root, cwd)
        errors.append(FileError(where, ErrorKind.UNREADABLE, exc.strerror or str(exc)))

    for folder, dirnames, filenames in os.walk(root, onerror=on_error, followlinks=False):
        kept = []
        for name in sorted(dirnames):
            full = os.path.join(folder, name)
            if name in SKIPPED_DIRS or name.endswith(".egg-info") or _is_virtualenv(full):
                continue
            if os.path.islink(full):
                continue  # never follow folder links: no loops, no escaping the tree
            if finder.for_path(Path(full)).is_excluded(Path(full)):
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            full_path = Path(folder, name)
            if finder.for_path(full_path).is_excluded(full_path):
                continue
            yield full_path
