"""Importing the real library (or saying in one line that it is missing) and naming the
innermost line of a stack that lies inside it."""

from __future__ import annotations

import importlib
import linecache
import os
import traceback
from types import CodeType, ModuleType
from typing import Any

from offlint.probing.sanitizer import Site


class LibraryMissing(ImportError):
    """The adapter's library cannot be imported here: one line, exit 2, never a traceback."""

    exit_code = 2


def import_library(module: str, distribution: str) -> ModuleType:
    """`importlib.import_module(module)`, any failure at import as one `LibraryMissing` line."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # an ImportError, or the library's own error at import
        first = (str(exc).strip().splitlines() or [""])[0]
        raise LibraryMissing(
            f"{distribution} is not importable here ({type(exc).__name__}: {first}); "
            f"this adapter needs the real library: pip install {distribution}"
        ) from None


def package_dir(module: ModuleType) -> str:
    """The folder of a package (`diffusers/`), with a trailing separator."""
    return os.path.dirname(os.path.abspath(module.__file__ or "")) + os.sep


def _inside(filename: str, directory: str) -> bool:
    return os.path.abspath(filename).startswith(directory)


def _line(file: str, line: int, function: str) -> Site:
    return Site(file, line, function, linecache.getline(file, line).strip())


def line_in_traceback(exc: BaseException, directory: str) -> Site | None:
    """The innermost frame of `exc`'s traceback inside `directory`."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if _inside(frame.filename, directory):
            return _line(frame.filename, frame.lineno or 0, frame.name)
    return None


def lines_in_summary(stack: traceback.StackSummary, directory: str) -> list[Site]:
    """Frames of a `StackSummary` (outermost first, as PyTorch's CUDA sanitizer keeps them)
    inside `directory`, innermost first."""
    return [
        _line(frame.filename, frame.lineno or 0, frame.name)
        for frame in reversed(stack)
        if _inside(frame.filename, directory)
    ]


def _code_line(code: CodeType, offset: int) -> int:
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return line
    return code.co_firstlineno


def lines_in_frames(frames: Any, directory: str) -> list[Site]:
    """The capture sanitizer's (code, instruction offset) frames, innermost first, inside
    `directory` (the sanitizer's own report keeps the user's frames, which may skip a
    library's)."""
    return [
        _line(code.co_filename, _code_line(code, offset), code.co_name)
        for code, offset in frames
        if _inside(code.co_filename, directory)
    ]
