"""The one error type that ends a probe before any scenario runs, and how a failure in the
user's code becomes its one line."""

from __future__ import annotations

import sysconfig
import traceback


class ProbeUsageError(Exception):
    """No usable GPU, a bad TARGET or bad options: exit code 2 with this one-line message."""

    exit_code = 2


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message (at file:line)`, the line being the innermost frame of
    the user's code (not the standard library's, importlib's, torch's or offlint's)."""
    text = str(exc).strip().splitlines()
    message = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    where = user_frame(exc)
    return f"{message} (at {where})" if where else message


_NOT_USER = ("/offlint/probing/", "<frozen ", "/importlib/", "/runpy.py")
_EXAMPLES = "/offlint/probing/examples/"
_TORCH_DIRS: list[str] = []


def _torch_dirs() -> list[str]:
    """torch's own folder (found, not imported; a venv at /opt/torch/ is not torch's code)."""
    if not _TORCH_DIRS:
        import importlib.util

        spec = importlib.util.find_spec("torch")
        locations = list(spec.submodule_search_locations or []) if spec else []
        _TORCH_DIRS.extend(path.replace("\\", "/").rstrip("/") + "/" for path in locations)
        _TORCH_DIRS.append("/site-packages/torch/")
    return _TORCH_DIRS


def is_user_file(filename: str) -> bool:
    """Whether a frame's file is the user's code (the bundled examples count as the user's)."""
    name = filename.replace("\\", "/")
    if _EXAMPLES in name:
        return True
    if any(part in name for part in _NOT_USER):
        return False
    if any(name.startswith(d) or (d.startswith("/site") and d in name) for d in _torch_dirs()):
        return False
    stdlib = sysconfig.get_paths().get("stdlib", "\0")
    return not (name.startswith(stdlib) and "site-packages" not in name)


def user_frame(exc: BaseException) -> str | None:
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if is_user_file(frame.filename):
            return f"{frame.filename}:{frame.lineno}"
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    return None
