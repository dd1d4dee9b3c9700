"""Unified diffs of fixed files, optionally coloured for a terminal."""

from __future__ import annotations

import difflib

import click

from offlint.analysis.engine import DecodeError, decode_source

_NO_NEWLINE = "\\ No newline at end of file\n"


def _lines(data: bytes) -> list[str]:
    try:
        text = decode_source(data)
    except DecodeError:
        text = data.decode("utf-8", errors="replace")
    # show CRLF files as lines, not as "^M" noise; a change of line ending alone is never made
    return text.replace("\r\n", "\n").splitlines(keepends=True)


def unified_diff(path: str, before: bytes, after: bytes, *, color: bool = False) -> str:
    out = []
    for line in difflib.unified_diff(
        _lines(before), _lines(after), fromfile=f"a/{path}", tofile=f"b/{path}"
    ):
        if not line.endswith("\n"):
            line += "\n" + _NO_NEWLINE
        out.append(_colour(line) if color else line)
    return "".join(out)


def _colour(line: str) -> str:
    if line.startswith(("+++", "---")):
        return click.style(line, bold=True)
    if line.startswith("@@"):
        return click.style(line, fg="cyan")
    if line.startswith("+"):
        return click.style(line, fg="green")
    if line.startswith("-"):
        return click.style(line, fg="red")
    return line
