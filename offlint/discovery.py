"""Which files a run looks at: `*.py` and `*.ipynb` below the given paths, minus what is never source.

Shared by `check` and `fix`. Folders are walked without following links (no symlink loops),
skipping VCS and build folders, virtual environments, the configured `exclude` globs and what git
ignores (git's own rules, matched with `pathspec`: every `.gitignore` from the repository root
down, and `.git/info/exclude`; `respect-gitignore = false` or `--no-respect-gitignore` turns that
off). A file named on the command line is checked as given unless `--force-exclude` (or
`force-exclude = true`) is on, which skips it when `exclude` matches it, as ruff's does
(pre-commit names every staged file: the hooks pass the flag); git's ignore rules never drop a named file (git
keeps tracking a file that a later `.gitignore` matches). A folder named on the command line is
walked even when it is excluded or ignored itself: naming it says it is wanted.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from offlint.config import Config, ConfigFinder
from offlint.diagnostics import ErrorKind, FileError
from offlint.guarded_io import Refused, read_regular

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

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


# Python files, and Jupyter notebooks (checked cell by cell: notebooks.py)
CHECKED_SUFFIXES = (".py", ".ipynb")


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
    paths: list[Path], finder: ConfigFinder, cwd: Path, skipped: list[str] | None = None
) -> tuple[list[Discovered], list[FileError]]:
    """The files below `paths`, and the paths that could not be read. `skipped`, when given,
    receives each named file left out by `exclude` (force-exclude), as displayed."""
    files: dict[str, Discovered] = {}
    errors: list[FileError] = []
    for given in paths:
        shown = display_path(given, cwd)
        try:
            # one stat, its error one line: Path.exists/is_file raise PermissionError on 3.11
            # when a folder on the way has no `x` for this user
            mode: int | None = os.stat(given).st_mode
        except FileNotFoundError:
            mode = None
        except OSError as exc:
            errors.append(FileError(shown, ErrorKind.UNREADABLE, exc.strerror or str(exc)))
            continue
        if mode is None and not os.path.islink(given):
            errors.append(FileError(shown, ErrorKind.MISSING, "no such file or directory"))
            continue
        if mode is not None and stat.S_ISREG(mode):
            real = os.path.realpath(given)
            config = finder.for_real_file(real)
            if config.force_exclude and config.exclude and _excluded_with_folders(config, given):
                if skipped is not None:
                    skipped.append(shown)
                continue
            files.setdefault(real, Discovered(str(given), shown, real))
            continue
        if mode is None or not stat.S_ISDIR(mode):
            errors.append(FileError(shown, ErrorKind.UNREADABLE, "not a file or directory (broken link?)"))
            continue
        for real, found in _walk(given, finder, errors, cwd):
            files.setdefault(real, found)
    ordered = sorted(files.values(), key=lambda d: d.display)
    return ordered, errors


def _excluded_with_folders(config: Config, path: Path) -> bool:
    """A named file is excluded when `exclude` matches it or a folder holding it below the
    config's root, as the walk would have judged each folder on the way down."""
    if config.is_excluded(path):
        return True
    try:
        relative = path.resolve().relative_to(config.root.resolve())
    except ValueError:
        return False
    return any(config.is_excluded(config.root / folder) for folder in relative.parents if str(folder) != ".")


class GitIgnored:
    """git's ignore rules for the folders of one walk: `.git/info/exclude` and every `.gitignore`
    from the repository root down. Deeper files win over shallower ones and, within a file, the
    last matching pattern wins (`!pattern` re-includes), as in git. Outside a git repository
    (no `.git` in the folder or above it) nothing is ignored, as git ignores nothing there."""

    def __init__(self, repository: str) -> None:
        self.repository = repository
        # real folder -> every ignore file that applies below it, deepest last
        self._specs: dict[str, tuple[_IgnoreFile, ...]] = {}
        # ignore files that exist but are refused (a FIFO, a device, too large, unreadable):
        # (path, reason), one error each for the walk to report
        self.refused: list[tuple[str, str]] = []

    @classmethod
    def around(cls, real_folder: str) -> GitIgnored | None:
        """The rules for a walk of `real_folder`, None outside any git repository."""
        folder = real_folder
        while not os.path.lexists(os.path.join(folder, ".git")):
            parent = os.path.dirname(folder)
            if parent == folder:
                return None
            folder = parent
        return cls(folder)

    def specs_for(self, real_folder: str) -> tuple[_IgnoreFile, ...]:
        known = self._specs.get(real_folder)
        if known is not None:
            return known
        own = _read_spec(os.path.join(real_folder, ".gitignore"), real_folder, self.refused)
        parent = os.path.dirname(real_folder)
        if real_folder == self.repository or parent == real_folder or os.path.lexists(
            os.path.join(real_folder, ".git")
        ):
            # a repository root (a nested repository starts afresh: its parent's rules stop here)
            exclude = _read_spec(os.path.join(real_folder, ".git", "info", "exclude"), real_folder, self.refused)
            found = tuple(spec for spec in (exclude, own) if spec is not None)
        else:
            inherited = self.specs_for(parent)
            found = (*inherited, own) if own is not None else inherited
        self._specs[real_folder] = found
        return found

    @staticmethod
    def ignores(specs: tuple[_IgnoreFile, ...], real_path: str, is_dir: bool) -> bool:
        for ignore_file in reversed(specs):
            relative = real_path[len(ignore_file.folder.rstrip("/")) + 1 :]
            if is_dir:
                relative += "/"
            if ignore_file.any_pattern is not None and ignore_file.any_pattern.match(relative) is None:
                continue
            verdict = ignore_file.spec.check_file(relative).include
            if verdict is not None:
                return verdict
        return False


class _IgnoreFile(NamedTuple):
    folder: str  # the real folder it applies below
    spec: GitIgnoreSpec
    # every pattern in one regular expression: most paths match none, and one search answers
    # that (pathspec tries each pattern in turn); None when the patterns cannot be joined
    any_pattern: re.Pattern[str] | None


def _read_spec(path: str, folder: str, refused: list[tuple[str, str]]) -> _IgnoreFile | None:
    """The patterns of one ignore file; None when it is absent, refused or empty. A file that
    exists but is refused (a FIFO would block the walk, a link to /dev/zero never end) is
    added to `refused` with its reason."""
    if not os.path.lexists(path):
        return None
    try:
        data, _ = read_regular(path)
    except Refused as exc:
        refused.append((path, str(exc)))
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    if not any(line.strip() and not line.startswith("#") for line in lines):
        return None
    from pathspec import GitIgnoreSpec

    spec = GitIgnoreSpec.from_lines(lines)
    sources = [getattr(getattr(p, "regex", None), "pattern", None) for p in spec.patterns if p.include is not None]
    joined: re.Pattern[str] | None = None
    if sources and all(isinstance(source, str) for source in sources):
        texts = [_GROUP.sub("(?:", str(source)) for source in sources]
        # patterns that match at any depth share their `(?:.+/)?` head: one scan for all of them
        anywhere = [text[len(_ANY_DEPTH) :] for text in texts if text.startswith(_ANY_DEPTH)]
        rooted = [f"(?:{text})" for text in texts if not text.startswith(_ANY_DEPTH)]
        parts = ([f"{_ANY_DEPTH}(?:{'|'.join(anywhere)})"] if anywhere else []) + rooted
        try:
            joined = re.compile("|".join(parts))
        except re.error:  # pragma: no cover - pathspec's regexes join; the slow path stays right
            joined = None
    return _IgnoreFile(folder, spec, joined)


_GROUP = re.compile(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")
_ANY_DEPTH = "^(?:.+/)?"


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
    git = GitIgnored.around(real_root) if given_config.respect_gitignore else None
    if (
        git is not None
        and real_root != git.repository
        and git.ignores(git.specs_for(os.path.dirname(real_root)), real_root, is_dir=True)
    ):
        git = None  # the named folder is ignored itself: naming it says it is wanted
    cwd_text = str(cwd)
    root_text = str(root)
    stack = [(root_text, real_root)]
    try:
        yield from _walk_folders(stack, root_text, cwd_text, finder, waived, git, cwd, on_error, errors)
    finally:
        if git is not None:
            errors.extend(
                FileError(display_path(Path(path), cwd), ErrorKind.UNREADABLE, f"ignore file {reason}")
                for path, reason in git.refused
            )


def _walk_folders(
    stack: list[tuple[str, str]],
    root_text: str,
    cwd_text: str,
    finder: ConfigFinder,
    waived: Config | None,
    git: GitIgnored | None,
    cwd: Path,
    on_error: Callable[[OSError], None],
    errors: list[FileError],
) -> Iterator[tuple[str, Discovered]]:
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
        ignore_specs = git.specs_for(real_folder) if git is not None else ()
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
                real_below = os.path.join(real_folder, name)
                if ignore_specs and GitIgnored.ignores(ignore_specs, real_below, is_dir=True):
                    continue
                below.append((full, real_below))
                continue
            if not name.endswith(CHECKED_SUFFIXES):
                continue
            full = entry.path
            real = os.path.join(real_folder, name)
            if ignore_specs and GitIgnored.ignores(ignore_specs, real, is_dir=False):
                continue
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
