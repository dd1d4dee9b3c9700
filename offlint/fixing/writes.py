"""Writing fixed files without ever corrupting one, losing an edit or escaping the tree.

The new bytes go to a temporary file in the same folder (same file system), created with
`O_EXCL` and named after the file and this process (`.NAME.PID-RANDOM.offlint-tmp`), are flushed
to disk, get the original's owner, permission bits and extended attributes, and replace the original with `os.replace`
(atomic on POSIX and Windows): a reader, or a run killed at any moment, sees the old file or the
new one, never half of one. What is refused, each with one line and the file left alone:

- a file whose bytes are not the ones the fix was computed from (`changed-on-disk`), checked on
  the bytes just before writing and again on its size, mtime, ctime and inode immediately before
  the rename (an editor's save in between is seen; POSIX has no compare-and-swap rename, so a
  save inside those last microseconds is the one window left);
- a link whose target lies outside the checked tree (`fix --apply .` must not rewrite a file
  elsewhere that a link placed in the tree points to); a link inside the tree is written through,
  the link itself is kept;
- a file with several hard links: replacing it would leave the other names on the old bytes
  (writing in place instead would not be atomic);
- a read-only file, and a file whose owner the new file cannot be given (only root can give a
  file away: a user rewriting someone else's file in a folder they may write would take it).

A run killed between creating and renaming its temporary file leaves it behind: the next `fix`
removes those of its own naming, in the folders it fixes, once their process is gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time
from collections.abc import Iterable
from pathlib import Path

from offlint.diagnostics import ErrorKind, FileError

TEMP_SUFFIX = ".offlint-tmp"
# `.NAME.PID-RANDOM.offlint-tmp`: only names of this shape are ever removed
_TEMP_NAME = re.compile(r"^\..+\.(?P<pid>[0-9]+)-[0-9a-f]{12}\.offlint-tmp$", re.DOTALL)
STALE_TEMP_SECONDS = 3600  # a temp file this old is stale even if its pid was reused since
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def inside(real: str, roots: Iterable[str]) -> bool:
    """Whether the resolved path `real` is one of `roots` or below one (roots resolved too)."""
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def tree_roots(paths: Iterable[Path]) -> list[str]:
    """The resolved paths named on the command line: what `fix` may write to and below."""
    return [os.path.realpath(path) for path in paths]


def outside_tree_error(display: str, real: str) -> FileError:
    return FileError(display, ErrorKind.WRITE, f"is a link to {real}, outside the checked tree; not written")


def write_if_unchanged(
    path: Path, display: str, expected: bytes, data: bytes, roots: Iterable[str] | None = None
) -> FileError | None:
    """Replace `path`'s contents by `data` if they are still `expected`; an error otherwise.
    `roots`: the checked tree (`tree_roots`); a link whose target is outside it is not written."""
    target = Path(os.path.realpath(path))  # write through a link, never replace the link itself
    if roots is not None and not inside(str(target), roots):
        return outside_tree_error(display, str(target))
    try:
        fd = os.open(target, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            before = os.fstat(handle.fileno())
            if not stat.S_ISREG(before.st_mode):
                return FileError(display, ErrorKind.WRITE, "is not a regular file; not written")
            on_disk = handle.read()
    except OSError as exc:
        return FileError(
            display,
            ErrorKind.CHANGED,
            f"cannot be read again before writing: {exc.strerror or exc}",
        )
    mode = stat.S_IMODE(before.st_mode)
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        # os.replace would swap a read-only file out regardless of its mode (and root writes
        # anything): honour the mode instead
        return FileError(display, ErrorKind.WRITE, "file is read-only; not written")
    if before.st_nlink > 1:
        return FileError(
            display,
            ErrorKind.WRITE,
            f"has {before.st_nlink} hard links; not written (replacing it would split them)",
        )
    if on_disk != expected:
        return FileError(
            display, ErrorKind.CHANGED, "changed on disk since it was read; not written"
        )
    tmp_name = None
    try:
        tmp_name, fd = _create_temp(target)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            problem = _give_owner_and_mode(handle.fileno(), tmp_name, before, mode)
            if problem is not None:
                return FileError(display, ErrorKind.WRITE, problem)
            copy_xattrs(str(target), handle.fileno())
            os.fsync(handle.fileno())
        # the last look before the rename: an editor's save since the read above shows here
        try:
            now = os.lstat(target)
        except FileNotFoundError:
            return FileError(display, ErrorKind.CHANGED, "vanished while being fixed; not written")
        if _signature(now) != _signature(before):
            return FileError(
                display, ErrorKind.CHANGED, "changed on disk while being written; not written"
            )
        os.replace(tmp_name, target)
        tmp_name = None
    except OSError as exc:
        return FileError(display, ErrorKind.WRITE, exc.strerror or str(exc))
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
    return None


def copy_xattrs(source: str, fd: int) -> None:
    """The original's extended attributes onto the new file (a rename replaces the inode, and
    with it tags, quarantine flags and labels users set). Best effort: a file system without
    them, or an attribute this user may not set (`security.*`, `trusted.*`), keeps the rest."""
    if not hasattr(os, "listxattr"):  # pragma: no cover - not Linux
        return
    try:
        names = os.listxattr(source)
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.setxattr(fd, name, os.getxattr(source, name))


def _signature(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_nlink)


def _create_temp(target: Path) -> tuple[str, int]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_BINARY", 0)
    for _attempt in range(100):
        name = target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(6)}{TEMP_SUFFIX}"
        try:
            return str(name), os.open(name, flags, 0o600)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name next to {target.name}")


def _give_owner_and_mode(fd: int, name: str, original: os.stat_result, mode: int) -> str | None:
    """The temporary file gets the original's owner, group and permission bits (the owner first:
    changing it clears set-id bits). None, or why the new file cannot be the original's."""
    if not hasattr(os, "fchown"):  # pragma: no cover - Windows: the read-only flag is all there is
        os.chmod(name, mode)
        return None
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) != (original.st_uid, original.st_gid):
        try:
            os.fchown(fd, original.st_uid, original.st_gid)
        except PermissionError:
            if mine.st_uid != original.st_uid:
                return "is owned by another user; not written (the rewritten file would be yours)"
            # same owner, a group this user is not in: the file keeps its owner, the group is ours
    os.fchmod(fd, mode)
    return None


def remove_stale_temps(folders: Iterable[Path]) -> int:
    """Remove the temporary files that killed `fix` runs left in `folders`: only names of our
    shape, only regular files (never through a link) owned by this user, and only once their
    process is gone (or after STALE_TEMP_SECONDS). The number removed."""
    removed = 0
    now = time.time()
    me = os.geteuid() if hasattr(os, "geteuid") else None
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            match = _TEMP_NAME.match(entry.name)
            if match is None:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or (me is not None and info.st_uid != me):
                continue
            if _alive(int(match["pid"])) and now - info.st_mtime < STALE_TEMP_SECONDS:
                continue  # a run that is writing it right now
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed += 1
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid() or os.name == "nt":  # Windows' os.kill terminates: age decides there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process, or cannot tell: keep the file
    return True
