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
    for candidate in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        try:
            return candidate.relative_to(cwd).as_posix()
        except ValueError:
            continue
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

    # a folder named on the command line is taken even when its config excludes it (as a file
    # is): that config's `exclude` is then waived below it; nested projects' still apply
    given_config = finder.for_path(root)
    waived = given_config if given_config.is_excluded(root) else None

    for folder, dirnames, filenames in os.walk(root, onerror=on_error, followlinks=False):
        # entries are judged by the config of the folder holding them, so a project's `exclude`
        # also drops a nested project (with its own pyproject.toml) below it
        config = finder.for_path(Path(folder))
        honour = config is not waived
        kept = []
        for name in sorted(dirnames):
            full = os.path.join(folder, name)
            if name in SKIPPED_DIRS or name.endswith(".egg-info") or _is_virtualenv(full):
                continue
            if os.path.islink(full):
                continue  # never follow folder links: no loops, no escaping the tree
            if honour and config.is_excluded(Path(full)):
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            full_path = Path(folder, name)
            if os.path.islink(full_path) and not os.path.exists(full_path):
                # a dangling link or a link loop: reported, never resolved (resolve would raise)
                try:
                    os.stat(full_path)
                except OSError as exc:
                    reason = exc.strerror or str(exc)
                else:  # pragma: no cover - it appeared in between
                    reason = "unreadable symbolic link"
                errors.append(FileError(display_path(full_path, cwd), ErrorKind.UNREADABLE, f"symbolic link: {reason}"))
                continue
            if honour and config.is_excluded(full_path):
                continue
            yield full_path
