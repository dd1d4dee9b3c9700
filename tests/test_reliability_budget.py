"""One size budget on every parse path (issue 36): libcst never sees a long literal table, in
`check` (the fix confirmation and the libcst front end), `fix` and stdin, files with stream code
included; `fix` plans on the file without its rows and puts them back byte for byte. Before: a
200 kB module of stream code and a table peaked at 183 MB under `check` (the confirming libcst
parse), and `fix` refused a 1 MB one as too large."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import libcst
import pytest
from click.testing import CliRunner

from offlint.analysis import engine
from offlint.analysis.engine import FileSettings, check_source
from offlint.analysis.prefilter import LITERAL_RUN
from offlint.catalogue import load_catalogue
from offlint.cli import main
from offlint.diagnostics import Diagnostic, Fix, TextEdit
from offlint.fixing import loop, summary
from offlint.fixing.apply import FixSettings
from offlint.fixing.availability import FIX_AVAILABILITY
from offlint.fixing.loop import fix_source

ROOT = Path(__file__).resolve().parent.parent
STREAM_CODE = (ROOT / "fixtures" / "group_offload_record_stream.py").read_text()
ALL = frozenset(load_catalogue())


def table_module(rows: int, newline: str = "\n") -> str:
    table = "".join(f"    ({', '.join(f'{i * 0.5 + j:.3f}' for j in range(12))}),\n" for i in range(rows))
    return (STREAM_CODE + "\nTABLE = [\n" + table + "]\n" + STREAM_CODE).replace("\n", newline)


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text handed to libcst's parser, as text."""
    seen: list[str] = []
    real = libcst.parse_module

    def spy(source: str | bytes, *args: object, **kwargs: object) -> libcst.Module:
        seen.append(source.decode("utf-8", "replace") if isinstance(source, bytes) else source)
        return real(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(libcst, "parse_module", spy)
    return seen


def _no_row(seen: list[str]) -> None:
    assert seen, "libcst parsed nothing: the test would pass vacuously"
    assert not any("0.500, 1.500" in text for text in seen)


def test_check_confirms_the_fix_without_parsing_the_table(parsed: list[str]) -> None:
    data = table_module(2 * LITERAL_RUN).encode()
    report = check_source(data, "m.py", FileSettings(select=ALL), fixes=FIX_AVAILABILITY)
    assert [d.code for d in report.diagnostics if d.fix is not None] == ["OFL204", "OFL204"]
    _no_row(parsed)


def test_the_libcst_front_end_does_not_parse_the_table(parsed: list[str]) -> None:
    data = table_module(2 * LITERAL_RUN).encode()
    reference = check_source(data, "m.py", FileSettings(select=ALL, front_end="libcst"), prefiltered=True)
    skeleton = check_source(data, "m.py", FileSettings(select=ALL), prefiltered=True)
    _no_row(parsed)
    assert [(d.code, d.location) for d in reference.diagnostics] == [(d.code, d.location) for d in skeleton.diagnostics]
    assert len(reference.diagnostics) == 2


@pytest.mark.parametrize(
    ("newline", "head"),
    [("\n", b""), ("\r\n", b"\xef\xbb\xbf"), ("\n", b"# -*- coding: latin-1 -*-\n# caf\xe9\n")],
    ids=["lf", "crlf-bom", "latin-1"],
)
def test_fix_puts_the_rows_back_byte_for_byte(
    newline: str, head: bytes, parsed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = head + table_module(2 * LITERAL_RUN, newline).encode()
    fixed = fix_source(data, "m.py", FixSettings(select=ALL))
    _no_row(parsed)
    assert not fixed.errors and fixed.changed
    assert fixed.fixed.count(b"consumer_stream = torch.cuda.current_stream()") == 2
    rows = data[data.index(b"TABLE = [") : data.index(b"]", data.index(b"TABLE = ["))]
    assert rows in fixed.fixed
    # what the whole-file parse gives, byte for byte
    monkeypatch.setattr(loop, "summarise", lambda data, text: None)
    assert fix_source(data, "m.py", FixSettings(select=ALL)).fixed == fixed.fixed


def test_fix_apply_and_stdin_on_a_1_mb_table_module(tmp_path: Path, parsed: list[str]) -> None:
    text = table_module(int(1_000_000 / 90))
    assert len(text) > 1_000_000  # over the libcst budget of 400 000 characters: refused before
    (tmp_path / "big.py").write_text(text)
    result = CliRunner().invoke(main, ["fix", "--apply", str(tmp_path / "big.py")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "big.py").read_text().count("consumer_stream") == 4
    piped = CliRunner().invoke(main, ["fix", "-"], input=text)
    assert piped.exit_code == 0 and piped.output.count("consumer_stream") == 4
    _no_row(parsed)
    assert max(map(len, parsed)) < 30_000


def test_restore_refuses_a_change_inside_a_table() -> None:
    text = table_module(LITERAL_RUN)
    data = text.encode()
    made = summary.summarise(data, text)
    assert made is not None
    ((low, _),) = made.runs
    lines = made.data.split(b"\n")
    inside = b"\n".join([*lines[: low + 3], b"    x,", *lines[low + 3 :]])
    assert summary.restore(made, data, inside) is None
    removed = b"\n".join([*lines[: low - 1], *lines[low:]])  # `TABLE = [` itself: outside the rows
    assert summary.restore(made, data, removed) == b"\n".join([*data.split(b"\n")[: low - 1], *data.split(b"\n")[low:]])
    assert summary.restore(made, data, made.data) == data


def test_check_offers_no_fix_that_edits_a_table() -> None:
    runs = [(10, 80)]
    base = Diagnostic(path="m.py", location=engine.Location(5, 1, 5, 2), code="OFL204", name="n", message="m")

    def with_edit(first: int, last: int) -> Diagnostic:
        return base.with_fix(Fix("t", base.fix_safety, (TextEdit(first, 1, last, 1, "x\n"),)))

    assert engine._edits_a_table(with_edit(12, 13), runs)  # replaces line 12 (a row)
    assert engine._edits_a_table(with_edit(30, 30), runs)  # inserts between rows
    assert not engine._edits_a_table(with_edit(11, 11), runs)  # inserts before the first row
    assert not engine._edits_a_table(with_edit(81, 82), runs)  # replaces the line after the table


_PEAK = """
import resource, sys
from click.testing import CliRunner
from offlint.cli import main
result = CliRunner().invoke(main, sys.argv[1:])
print(result.exit_code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _peak(tmp_path: Path, *args: str) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", _PEAK, *args], capture_output=True, text=True, cwd=tmp_path, timeout=300, check=True)
    code, peak = done.stdout.split()[:2]
    return int(code), int(peak)


def test_a_200_kb_table_module_with_stream_code_costs_little_under_check_and_fix(tmp_path: Path) -> None:
    (tmp_path / "small.py").write_text(STREAM_CODE)
    (tmp_path / "big.py").write_text(table_module(int(200_000 / 90)))
    _, base = _peak(tmp_path, "check", "--no-cache", "-j1", "small.py")
    code, checked = _peak(tmp_path, "check", "--no-cache", "-j1", "big.py")
    assert code == 1
    code, fixed = _peak(tmp_path, "fix", "--apply", "big.py")
    assert code == 0 and "consumer_stream" in (tmp_path / "big.py").read_text()
    size = (tmp_path / "big.py").stat().st_size
    # 183 MB (900x the file) before; the libcst parse of the table was the cost
    assert checked - base <= 20 * size and fixed - base <= 20 * size, (checked / 1e6, fixed / 1e6, base / 1e6)


def test_a_notebook_cell_table_is_not_parsed_either(tmp_path: Path, parsed: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    table = "TABLE = [\n" + "".join(f"    ({i}.5, {i}.25, 'r{i}'),\n" for i in range(2 * LITERAL_RUN)) + "]\n"
    cells = [STREAM_CODE, table]
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "source": text.splitlines(keepends=True), "outputs": []} for text in cells],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "n.ipynb").write_text(json.dumps(notebook))
    monkeypatch.chdir(tmp_path)
    found = []
    for parser in ("cpython", "libcst"):  # the libcst front end parses every analysed file with libcst
        result = CliRunner().invoke(main, ["check", "--no-cache", "--parser", parser, "--output-format", "concise", "n.ipynb"])
        assert result.exit_code == 1, result.output
        found.append([line for line in result.output.splitlines() if "OFL204" in line])
    assert found[0] == found[1] and len(found[0]) == 1 and "cell 1:43:21" in found[0][0]
    assert parsed and not any("'r70'" in text for text in parsed)
    # stdin with the same text: the same
    piped = CliRunner().invoke(main, ["check", "--no-cache", "--parser", "libcst", "-"], input=STREAM_CODE + table)
    assert piped.exit_code == 1 and "OFL204" in piped.output
    assert not any("'r70'" in text for text in parsed)


def test_a_long_literal_on_one_line_is_one_string_to_the_parsers(parsed: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from offlint.analysis.prefilter import LONG_LITERAL, blank_literal_tables

    weights = "[" + ", ".join(f"{i * 0.0001:.4f}" for i in range(3000)) + "]"
    assert len(weights) > LONG_LITERAL
    text = STREAM_CODE + f"\nW = {weights}\nY = f(1, x=({weights[1:-1]}))\n" + STREAM_CODE
    light = blank_literal_tables(text)
    assert [len(line) for line in light.split("\n")] == [len(line) for line in text.split("\n")]  # columns kept
    assert "W = ['    " in light and "0.2999" not in light
    data = text.encode()
    report = check_source(data, "m.py", FileSettings(select=ALL), fixes=FIX_AVAILABILITY)
    assert [d.location.line for d in report.diagnostics if d.fix is not None] == [43, 43 + STREAM_CODE.count("\n") + 3]
    fixed = fix_source(data, "m.py", FixSettings(select=ALL))
    assert not any("0.2999" in source for source in parsed)
    assert fixed.changed and f"W = {weights}\n" in fixed.fixed.decode()
    monkeypatch.setattr(loop, "summarise", lambda data, text: None)
    assert fix_source(data, "m.py", FixSettings(select=ALL)).fixed == fixed.fixed


@pytest.mark.parametrize(
    "line",
    [
        "z = x[{}]",  # a subscript cannot be empty
        "z = [a, {}]",  # a name inside: not a literal
        "z = [{}",  # never closed
        "z = f'[{}]'",  # not a simple string
        "z = " + "[" * 30 + "{}" + "]" * 30,  # nested deeper than a row may be: the parsers judge it
    ],
)
def test_what_is_not_a_whole_literal_on_one_line_is_left(line: str) -> None:
    from offlint.analysis.prefilter import blank_literal_tables

    elements = ", ".join(str(i) for i in range(1000))
    text = "import torch\n" + line.format(elements) + "\n"
    assert blank_literal_tables(text) == text


def test_add_noqa_parses_no_table_either(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from offlint.analysis import guard
    from offlint.pipeline import add_noqa

    compiled: list[str] = []
    real = guard.compile_quietly

    def spy(source: str, *args: object, **kwargs: object) -> object:
        compiled.append(source)
        return real(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(guard, "compile_quietly", spy)
    monkeypatch.setattr(add_noqa, "compile_quietly", spy)
    (tmp_path / "m.py").write_text(table_module(2 * LITERAL_RUN))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--add-noqa", "m.py"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m.py").read_text().count("# offlint: ignore[OFL204]") == 2
    assert compiled and not any("0.500, 1.500" in text for text in compiled)
