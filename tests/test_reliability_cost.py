"""Bounded cost (issue 27, item 3): a module with stream code and a large literal table costs
little (the table is not parsed into a tree: `blank_literal_tables`), and a file over the
analysis or fix (libcst) budget is one `too-large` line in every run, single-file runs too.
Before: a 1 MB such module took 40 s and 1.15 GB; 20 MB aborted at 13 GB."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.analysis.prefilter import LITERAL_RUN, blank_literal_tables
from offlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
STREAM_CODE = (ROOT / "fixtures" / "group_offload_record_stream.py").read_text()


def table_module(megabytes: float) -> str:
    rows = []
    total = len(STREAM_CODE)
    i = 0
    while total < megabytes * 1_000_000:
        row = f"    ({i}, 'layer_{i}', {i * 3.5}, [{i}, {i + 1}], {{'k': {i}, \"v\": None}}),\n"
        rows.append(row)
        total += len(row)
        i += 1
    # the stream code after the table too: its findings keep their lines
    return STREAM_CODE + "\nTABLE = [\n" + "".join(rows) + "]\n" + STREAM_CODE


_PEAK = """
import resource, sys
from click.testing import CliRunner
from offlint.cli import main
result = CliRunner().invoke(main, sys.argv[1:])
print(result.exit_code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
print(result.output)
"""


def _peak_check(path: Path, *extra: str) -> tuple[int, int, str]:
    """(exit code, peak RSS in bytes, output) of `check` on `path` in a fresh interpreter."""
    command = [sys.executable, "-c", _PEAK, "check", "--no-cache", "-j1", "--output-format", "concise", *extra, str(path)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=path.parent, timeout=300, check=True)
    head, _, output = done.stdout.partition("\n")
    code, peak = head.split()
    return int(code), int(peak), output


def test_a_large_literal_table_costs_at_most_20x_its_size(tmp_path: Path) -> None:
    small = tmp_path / "small.py"
    small.write_text(STREAM_CODE)
    big = tmp_path / "big.py"
    big.write_text(table_module(1.0))
    _, base, small_out = _peak_check(small)
    code, peak, out = _peak_check(big)
    assert code == 1, out
    size = big.stat().st_size
    assert peak - base <= 20 * size, f"{(peak - base) / 1e6:.0f} MB over the small file's {base / 1e6:.0f} MB"
    # the same findings as the stream code alone, on both copies, at their lines
    lines = STREAM_CODE.count("\n")
    table_lines = big.read_text().count("\n") - 2 * lines
    small_found = [line.split(": ", 1)[1] for line in small_out.splitlines() if ": OFL" in line]
    big_found = [line for line in out.splitlines() if ": OFL" in line]
    assert len(big_found) == 2 * len(small_found) > 0
    first = small_out.splitlines()[0].split(":")[1]
    assert f"big.py:{first}:" in big_found[0]
    assert f"big.py:{int(first) + lines + table_lines}:" in big_found[-1]


def test_over_the_analysis_budget_is_one_too_large_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.py").write_text(table_module(0.05))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLINT_MAX_ANALYSIS_CHARS", "20000")
    result = CliRunner().invoke(main, ["check", "--no-cache", "big.py"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if "too-large" in line]
    assert len(errors) == 1 and "analysis budget of 20000" in errors[0] and "OFFLINT_MAX_ANALYSIS_CHARS" in errors[0]
    result = CliRunner().invoke(main, ["fix", "big.py"])
    assert result.exit_code == 2 and "too-large" in result.output
    monkeypatch.setenv("OFFLINT_MAX_ANALYSIS_CHARS", "2000000")
    result = CliRunner().invoke(main, ["check", "--no-cache", "big.py"])
    assert result.exit_code == 1 and "OFL204" in result.output


def test_over_the_fix_budget_findings_stand_without_a_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.py").write_text(table_module(0.05))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "offlint-json", "big.py"])
    assert result.exit_code == 1
    assert any(d["fix"] is not None for d in json.loads(result.stdout)["diagnostics"])  # under the budget: fixable
    # the budget counts what libcst is handed: the file without its table rows (issue 36)
    monkeypatch.setenv("OFFLINT_MAX_FIX_CHARS", "20000")
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "offlint-json", "big.py"])
    assert any(d["fix"] is not None for d in json.loads(result.stdout)["diagnostics"])
    budget = str(len(STREAM_CODE))  # the two copies of the stream code are over it
    monkeypatch.setenv("OFFLINT_MAX_FIX_CHARS", budget)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "offlint-json", "big.py"])
    assert result.exit_code == 1
    found = json.loads(result.stdout)["diagnostics"]
    assert found and all(d["fix"] is None for d in found)
    result = CliRunner().invoke(main, ["fix", "--apply", "big.py"])
    assert result.exit_code == 2 and f"over the fix (libcst) budget of {budget}" in result.output


def test_only_whole_literal_rows_are_blanked() -> None:
    table = "x = [\n" + "    (1, 'a', -2.5e3, 0x1f, True, {'k': None}),\n" * LITERAL_RUN + "]\n"
    blanked = blank_literal_tables(table)
    assert blanked == "x = [\n" + "\n" * LITERAL_RUN + "]\n"
    for row in ("    f(1),\n", "    (1, name),\n", "    1 if c else 2,\n", "    '''open,\n", "    (1,\n"):
        text = "x = [\n" + "    1,\n" * (LITERAL_RUN // 2) + row + "    1,\n" * (LITERAL_RUN // 2) + "]\n"
        assert blank_literal_tables(text) == text, row  # no run long enough around it
    crlf = table.replace("\n", "\r\n")
    assert blank_literal_tables(crlf).count("\r\n") == crlf.count("\r\n")


def test_a_cached_result_is_not_reused_under_other_budgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m.py").write_text(STREAM_CODE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLINT_MAX_ANALYSIS_CHARS", "1000")
    result = CliRunner().invoke(main, ["check", "m.py"])
    assert result.exit_code == 2 and "too-large" in result.output
    monkeypatch.delenv("OFFLINT_MAX_ANALYSIS_CHARS")
    result = CliRunner().invoke(main, ["check", "m.py"])  # the same cache
    assert result.exit_code == 1 and "OFL204 [*]" in result.output, result.output
