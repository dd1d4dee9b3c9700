"""The one guarded path for every file offlint reads or writes that is not a source it checks
through the cache: configuration (pyproject.toml, --config), ignore files (.gitignore,
.git/info/exclude), baselines (--baseline, --write-baseline) and the sources themselves.

- Only regular files are read: a FIFO would block `open` or `read` for ever, a device such as
  `/dev/zero` reads without end. The file is opened with O_NONBLOCK (so opening a FIFO returns at
  once) and refused by its `fstat` type before a byte is read.
- A size cap: `read_regular` reads at most `limit + 1` bytes, so a file growing past its `fstat`
  size is caught too; never a MemoryError.
- Every failure is a `Refused` carrying one line (the reason without the path): the caller names
  the path and decides the exit code.
- `write_new_file` writes a file that the run creates (a baseline) atomically: a temporary file
  in the same folder, renamed over the target, so an error never leaves an empty or half file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable

# sources: the analysis budget is far below this (see analysis/limits); anything larger is not
# a hand-written module
MAX_SOURCE_BYTES = 64 * 1024 * 1024
# configuration, ignore files and baselines are small; a baseline of a large tree is a few MB
MAX_SMALL_FILE_BYTES = 16 * 1024 * 1024

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class Refused(Exception):
    """A file that is not read or written; `str()` is one line without the path."""


class TooLarge(Refused):
    """A file over the size cap of its kind."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).splitlines()[0] if (exc.strerror or str(exc)) else type(exc).__name__


def read_regular(path: str | os.PathLike[str], limit: int = MAX_SMALL_FILE_BYTES) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file (links followed) and its stat taken before reading. Refused
    when the file is missing (FileNotFoundError is kept as the cause), not a regular file, larger
    than `limit` bytes, or cannot be opened or read."""
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK)
    except OSError as exc:
        raise Refused(_reason(exc)) from exc
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                kind = _kind(info.st_mode)
                raise Refused(f"is {kind}, not a regular file" if kind.startswith("a ") else f"is {kind}")
            if info.st_size > limit:
                raise TooLarge(f"is {info.st_size} bytes, over the limit of {limit} bytes")
            data = handle.read(limit + 1)
        except OSError as exc:
            raise Refused(_reason(exc)) from exc
    if len(data) > limit:
        raise TooLarge(f"grew past the limit of {limit} bytes while being read")
    return data, info


def read_regular_text(path: str | os.PathLike[str], limit: int = MAX_SMALL_FILE_BYTES) -> str:
    """`read_regular`, decoded as UTF-8 (a decoding error is Refused too)."""
    data, _ = read_regular(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"is not UTF-8 (byte {exc.start})") from exc


def inside(real: str, roots: Iterable[str]) -> bool:
    """Whether the resolved path `real` is one of `roots` or below one (roots resolved too)."""
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def write_new_file(path: str | os.PathLike[str], data: bytes, roots: Iterable[str] | None = None) -> None:
    """Create or replace `path` with `data` atomically (a temporary file renamed over it). Written
    through a link, and refused when `path` is a link leading outside `roots` (resolved); refused
    when the existing target is not a regular file. Refused with one line on any failure, and
    nothing is left behind."""
    target = os.path.realpath(path)
    # a path named plainly may lie anywhere (`--write-baseline /tmp/b.json`); a link placed in
    # the tree must not lead the write elsewhere
    if roots is not None and os.path.islink(path) and not inside(target, roots):
        raise Refused(f"is a link to {target}, outside the checked tree; not written")
    try:
        before: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        before = None
    except OSError as exc:
        raise Refused(_reason(exc)) from exc
    if before is not None and not stat.S_ISREG(before.st_mode):
        raise Refused(f"is {_kind(before.st_mode)}; not written")
    folder, name = os.path.split(target)
    tmp = None
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
        tmp = os.path.join(folder, f".{name}.{os.getpid()}-{secrets.token_hex(6)}.offlint-tmp")
        fd = os.open(tmp, flags, 0o666 & ~_umask() if before is None else stat.S_IMODE(before.st_mode))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise Refused(_reason(exc)) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
