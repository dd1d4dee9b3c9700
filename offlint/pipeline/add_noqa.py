"""`check --add-noqa`: a suppression directive for every finding, written in place."""

from __future__ import annotations

import io
import os
import tokenize
from collections.abc import Sequence
from pathlib import Path

import click

from offlint.analysis.guard import compile_quietly
from offlint.analysis.positions import ast_statement_spans
from offlint.analysis.prefilter import without_literals
from offlint.diagnostics import ErrorKind, FileError, RunReport
from offlint.fixing.writes import inside, outside_tree_error, write_if_unchanged
from offlint.guarded_io import MAX_SOURCE_BYTES, Refused, read_regular
from offlint.notebooks import NOTEBOOK_NOT_FIXABLE, is_notebook
from offlint.reporting import render_run_errors
from offlint.suppression import AddedDirectives, add_directives

EXIT_CLEAN, EXIT_ERROR = 0, 2


def _spans_of(text: str) -> list[tuple[int, int]]:
    # the user's warnings are not ours to print; the tables' rows keep their lines, not their tree
    return ast_statement_spans(compile_quietly(without_literals(text)))


def with_suppressions(text: str, wanted: dict[int, set[str]]) -> AddedDirectives:
    """`text` with a directive for each (line, codes) of `wanted`, placed as `--add-noqa` places
    them (the editor's "suppress" action)."""
    return add_directives(text, wanted, _spans_of)


def add_noqa(report: RunReport, cwd: Path, roots: Sequence[str], *, quiet: bool = False) -> int:
    """`--add-noqa`: a directive for every finding, written in place; exit 0 when each finding is
    now suppressed, 2 when a file could not be edited (one line each). `roots`: the checked tree
    (`tree_roots`): a file whose link leads outside it is not written, as `fix` refuses it."""
    errors: list[FileError] = list(report.all_errors)
    added = files = 0
    for file_report in report.files:
        if not file_report.diagnostics:
            continue
        display = file_report.path
        path = cwd / display
        if is_notebook(display):
            # its rows are its cells': a directive written by row would corrupt the JSON
            errors.append(FileError(display, ErrorKind.WRITE, NOTEBOOK_NOT_FIXABLE))
            continue
        wanted: dict[int, set[str]] = {}
        for diagnostic in file_report.diagnostics:
            wanted.setdefault(diagnostic.location.line, set()).add(diagnostic.code)
        real = os.path.realpath(path)
        if not inside(real, roots):
            errors.append(outside_tree_error(display, real))
            continue
        try:
            data, _ = read_regular(path, MAX_SOURCE_BYTES)
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            bom = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""
            text = data[len(bom) :].decode("utf-8" if encoding == "utf-8-sig" else encoding)
            if bom + text.encode("utf-8" if encoding == "utf-8-sig" else encoding) != data:
                raise ValueError("its bytes do not survive decoding and encoding again")
        except (Refused, OSError, SyntaxError, ValueError, LookupError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            errors.append(FileError(display, ErrorKind.WRITE, f"cannot add suppressions: {reason}"))
            continue
        result = with_suppressions(text, wanted)
        for line, code in result.unplaced:
            errors.append(FileError(display, ErrorKind.WRITE, f"no place for a suppression of {code}", line=line))
        if result.added:
            new = bom + result.text.encode("utf-8" if encoding == "utf-8-sig" else encoding)
            error = write_if_unchanged(path, display, data, new, roots)
            if error is not None:
                errors.append(error)
                continue
            added += result.added
            files += 1
    click.echo(render_run_errors(RunReport(errors=errors)), err=True, nl=False)
    if not quiet:
        noun = "suppression" if added == 1 else "suppressions"
        click.echo(f"Added {added} {noun} to {files} file{'s' if files != 1 else ''}.", err=True)
    return EXIT_ERROR if errors else EXIT_CLEAN
