"""Jupyter notebooks (`.ipynb`): checked cell by cell, as ruff does.

The code cells are joined into one Python module (in order, a blank line between cells) and that
module is analysed like any file; every position is then mapped back to its cell: a diagnostic
in the third cell of the notebook says `cell 3:2:5` (cells are numbered as the notebook shows
them, 1-based, markdown cells counted; rows and columns are the cell's own).

IPython's own syntax is not Python: lines that are line magics or shell escapes (`%time f()`,
`!pip install x`, `x = !ls`, `obj?`) are replaced by `pass` at the same indentation, so rows and
the blocks around them keep their shape; a cell whose first line is a cell magic (`%%bash`) is
not Python and is skipped, except the magics that run their body as Python (`%%time`, ...), whose
first line alone is blanked. A notebook whose kernel is not Python has no code to check.

`fix` does not rewrite notebooks yet: the fix pipeline refuses them with a note.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
from dataclasses import dataclass

from offlint.diagnostics import Diagnostic, ErrorKind, FileError, FileReport, Location

NOTEBOOK_SUFFIX = ".ipynb"
NOTEBOOK_NOT_FIXABLE = "not fixable in notebooks yet (left unchanged)"
# cell magics whose body is Python run under some wrapper: checked, their first line blanked
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "pypy", "python", "python3"})
# `%magic`, `!cmd`, `x = !cmd`, `x = %magic`, `obj?` / `??obj`: IPython, not Python
_MAGIC = re.compile(r"^\s*(?:[%!]|\?\?|[\w.]+\s*=\s*[%!]|[\w.]+\?\??\s*$)")


class NotebookError(ValueError):
    """The file is not a notebook offlint can read (not JSON, or not nbformat's shape)."""


def is_notebook(path: str) -> bool:
    return path.endswith(NOTEBOOK_SUFFIX)


@dataclass(frozen=True)
class Notebook:
    source: str  # the code cells as one module, magics blanked
    starts: tuple[int, ...]  # the module's row (1-based) where each checked cell begins
    numbers: tuple[int, ...]  # the notebook's number (1-based) of each checked cell
    cells: dict[int, list[str]]  # cell number -> its lines as written (for code frames)

    def cell_of(self, row: int) -> tuple[int | None, int]:
        """(cell number, row in that cell) of a row of `source`; (None, row) before any cell."""
        at = bisect.bisect_right(self.starts, row) - 1
        if at < 0:
            return None, row
        return self.numbers[at], row - self.starts[at] + 1

    def map_report(self, report: FileReport) -> FileReport:
        """The report of `source`, with every position in its cell. Fixes are dropped: `fix`
        does not rewrite notebooks (yet), so none is offered. A notebook is no importable
        module, so it indexes nothing for the cross-module call graph."""
        report.diagnostics = [self._map_diagnostic(d) for d in report.diagnostics]
        report.errors = [self._map_error(e) for e in report.errors]
        report.index = ()
        report.fixes_confirmed_at = None
        return report

    def _map_diagnostic(self, diagnostic: Diagnostic) -> Diagnostic:
        where = diagnostic.location
        cell, line = self.cell_of(where.line)
        end_cell, end_line = self.cell_of(where.end_line)
        location = (
            Location(line, where.column, end_line, where.end_column)
            if end_cell == cell
            else Location(line, where.column, line, where.column + 1)  # never a span across cells
        )
        return dataclasses.replace(diagnostic.without_fix(), location=location, cell=cell)

    def _map_error(self, error: FileError) -> FileError:
        if error.line is None:
            return error
        cell, line = self.cell_of(error.line)
        return dataclasses.replace(error, line=line, cell=cell)


def _cell_lines(cell: dict[str, object]) -> list[str]:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        text = "".join(source)
    elif isinstance(source, str):
        text = source
    else:
        raise NotebookError("a cell's source is neither a string nor a list of strings")
    return text.splitlines()


def _python_lines(lines: list[str]) -> list[str] | None:
    """The cell as Python: magic lines (and their backslash continuations) as `pass` at their
    indentation; None when the whole cell is a non-Python cell magic."""
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].lstrip()[2:].split(maxsplit=1)
        if not name or name[0] not in _PYTHON_CELL_MAGICS:
            return None
        lines = ["", *lines[1:]]
    out: list[str] = []
    continued = False
    for line in lines:
        if continued or _MAGIC.search(line):
            indent = line[: len(line) - len(line.lstrip())]
            out.append("" if continued else f"{indent}pass")
            continued = line.rstrip().endswith("\\")
            continue
        out.append(line)
    return out


def read_notebook(data: bytes) -> Notebook:
    """The notebook's code cells as one module. Raises NotebookError when `data` is not one."""
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise NotebookError(f"not a notebook: invalid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
        raise NotebookError("not a notebook: no `cells` list")
    metadata = document.get("metadata")
    language = metadata.get("language_info", {}) if isinstance(metadata, dict) else {}
    if isinstance(language, dict) and language.get("name", "python") != "python":
        return Notebook("", (), (), {})  # another kernel's code: nothing to check
    rows: list[str] = []
    starts: list[int] = []
    numbers: list[int] = []
    cells: dict[int, list[str]] = {}
    for number, cell in enumerate(document["cells"], start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"not a notebook: cell {number} is not an object")
        if cell.get("cell_type") != "code":
            continue
        written = _cell_lines(cell)
        python = _python_lines(written)
        if python is None:
            continue
        if rows:
            rows.append("")  # cells are separate statements: a blank row between them
        starts.append(len(rows) + 1)
        numbers.append(number)
        cells[number] = written
        rows.extend(python)
    source = "".join(row + "\n" for row in rows)
    return Notebook(source, tuple(starts), tuple(numbers), cells)


def notebook_error(display: str, exc: NotebookError) -> FileError:
    return FileError(display, ErrorKind.UNDECODABLE, str(exc))
