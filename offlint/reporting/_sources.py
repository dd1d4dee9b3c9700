"""What every renderer shares: how a diagnostic's path is shown, and the lazily read source text."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePath


def display_path(path: str, root: Path) -> str:
    """The path as users and CI tools see it: relative to `root` when under it, forward slashes,
    and always printable text (`printable`): a file name is whatever bytes a folder holds.

    Paths outside `root` (or relative paths the engine was given) are kept as they are, so two
    runs from the same place print the same text.
    """
    return printable(relative_path(path, root))


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
        self._lines: dict[str, list[str] | None] = {}

    def lines(self, path: str) -> list[str] | None:
        if path not in self._lines:
            self._lines[path] = self._read(path)
        return self._lines[path]

    def line(self, path: str, number: int) -> str | None:
        lines = self.lines(path)
        if lines is None or not 1 <= number <= len(lines):
            return None
        return lines[number - 1]

    def _read(self, path: str) -> list[str] | None:
        text = self._given.get(path)
        if text is None:
            try:
                text = (self._root / path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError, ValueError):
                return None
        return text.splitlines()
