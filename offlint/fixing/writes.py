"""Writing fixed files without ever corrupting one.

The new bytes go to a temporary file in the same folder (same file system), are flushed to disk,
get the original's permission bits, and replace the original with `os.replace` (atomic on POSIX
and Windows). Just before, the file is read again: if its bytes are not the ones the fix was
computed from, someone changed it meanwhile and it is left alone (`changed-on-disk`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from offlint.diagnostics import ErrorKind, FileError


def write_if_unchanged(path: Path, display: str, expected: bytes, data: bytes) -> FileError | None:
    """Replace `path`'s contents by `data` if they are still `expected`; an error otherwise."""
    target = path.resolve()  # write through a link, never replace the link itself
    try:
        on_disk = target.read_bytes()
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError as exc:
        return FileError(
            display,
            ErrorKind.CHANGED,
            f"cannot be read again before writing: {exc.strerror or exc}",
        )
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        # os.replace would swap a read-only file out regardless of its mode (and root writes
        # anything): honour the mode instead
        return FileError(display, ErrorKind.WRITE, "file is read-only; not written")
    if on_disk != expected:
        return FileError(
            display, ErrorKind.CHANGED, "changed on disk since it was read; not written"
        )
    tmp_name = None
    try:
        fd, tmp_name = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".offlint-tmp"
        )
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
        tmp_name = None
    except OSError as exc:
        return FileError(display, ErrorKind.WRITE, exc.strerror or str(exc))
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
    return None
