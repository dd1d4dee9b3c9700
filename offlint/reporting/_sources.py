"""What every renderer shares: how a diagnostic's path is shown, and the lazily read source text."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePath


def display_path(path: str, root: Path) -> str:
    """The path as users and CI tools see it: relative to `root` when under it, forward slashes,
    and always printable text (`printable`): a file name is whatever bytes a folder holds.

    Paths outside `root` (or relative paths the engine was given) are kept as they are, so two
    runs from the same place print the same text.
    """
    return printable(relative_path(path, root))


def repository_root(cwd: Path, fallback: Path | None = None) -> Path:
    """The nearest folder at or above `cwd` holding `.git` (a folder, or the file a worktree or
    submodule has); else `fallback` (the project root), else `cwd` itself."""
    for folder in (cwd, *cwd.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return fallback or cwd


def path_from(path: str, cwd: Path, base: Path) -> str:
    """`path` (absolute, or relative to `cwd`) as `display_path` relative to `base` instead;
    absolute when outside it. Lexically normalised: `../x.py` from a subfolder stays inside."""
    absolute = PurePath(os.path.normpath(PurePath(cwd, path)))
    return printable(relative_path(str(absolute), base))


def relative_path(path: str, root: Path) -> str:
    """`display_path` before escaping: the name as the file system has it (undecodable bytes as
    Python's surrogate escapes), for views that encode it their own way (SARIF's URIs)."""
    pure = PurePath(path)
    if pure.is_absolute():
        for base in (root, root.resolve()):
            if pure.is_relative_to(base):
                return pure.relative_to(base).as_posix()
    return pure.as_posix()


def printable(text: str) -> str:
    """`text` as valid, one-line UTF-8 text: bytes that were not UTF-8 (surrogate escapes) become
    `\\xNN`, and newlines, tabs and other control or invisible characters their escapes (`\\n`),
    so a file name can neither split a line-based format nor make the output undecodable."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable():
            out.append(char)
        elif "\udc80" <= char <= "\udcff":  # an undecodable byte, as os.fsdecode keeps it
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        else:
            out.append(char.encode("unicode_escape", "backslashreplace").decode("ascii"))
    return "".join(out)


class SourceCache:
    """Source text per diagnostic path, read from disk at most once and only when a view needs it.

    `sources` (path -> text) wins over the disk, so the CLI can hand over the text it analysed;
    a file that cannot be read or decoded yields None and the views simply show no frame.
    """

    def __init__(self, root: Path, sources: Mapping[str, str] | None = None) -> None:
        self._root = root
        self._given = dict(sources or {})
        self._lines: dict[tuple[str, int | None], list[str] | None] = {}

    def lines(self, path: str, cell: int | None = None) -> list[str] | None:
        """The lines of a file, or of one cell of a notebook (`cell`, 1-based)."""
        key = (path, cell)
        if key not in self._lines:
            self._lines[key] = self._read(path, cell)
        return self._lines[key]

    def line(self, path: str, number: int, cell: int | None = None) -> str | None:
        lines = self.lines(path, cell)
        if lines is None or not 1 <= number <= len(lines):
            return None
        return lines[number - 1]

    def _read(self, path: str, cell: int | None) -> list[str] | None:
        text = self._given.get(path)
        if text is None:
            try:
                text = (self._root / path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError, ValueError):
                return None
        if cell is None:
            return text.splitlines()
        from offlint.notebooks import NotebookError, read_notebook

        try:
            return read_notebook(text.encode("utf-8")).cells.get(cell)
        except NotebookError:
            return None
