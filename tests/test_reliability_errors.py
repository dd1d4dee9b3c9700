"""Errors that name the real place (issue 27, item 5): CPython's line and message for a syntax
error, valid code libcst cannot parse analysed (not fixable) instead of a syntax error, and an
empty selection refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "golden" / "record_stream" / "in.py"


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_a_syntax_error_is_reported_where_cpython_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = FIXTURE.read_text() + "\nx = '''unterminated\n"
    (tmp_path / "m.py").write_text(text)
    with pytest.raises(SyntaxError) as cpython:
        compile(text, "m.py", "exec")
    code, out = _run(tmp_path, monkeypatch, "check", "--no-cache", "m.py")
    assert code == 2
    assert f"m.py:{cpython.value.lineno}:{cpython.value.offset}: syntax-error: {cpython.value.msg}" in out


def test_valid_code_libcst_cannot_parse_is_analysed_not_a_syntax_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = FIXTURE.read_text() + "\nS = (\n" + "\n".join(["'a'"] * 4000) + ")\n"
    compile(text, "m.py", "exec")  # valid Python
    (tmp_path / "m.py").write_text(text)
    code, out = _run(tmp_path, monkeypatch, "check", "--no-cache", "m.py")
    assert "syntax-error" not in out
    assert code == 1 and "OFL204" in out  # the findings of the skeleton analysis
    assert "fixable" not in out  # `fix` cannot edit what libcst cannot parse


@pytest.mark.parametrize("command", ["check", "fix"])
def test_an_empty_selection_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    (tmp_path / "m.py").write_bytes(FIXTURE.read_bytes())
    code, out = _run(tmp_path, monkeypatch, command, "--select", "", "m.py")
    assert code == 2
    assert "--select: an empty selection runs no rule" in out


@pytest.mark.parametrize("command", ["check", "fix"])
def test_a_syntax_error_from_the_depth_screen_has_cpython_s_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    # a line over 1 000 characters sends the file through the screen, which refuses it itself
    text = FIXTURE.read_text() + "\nX = [" + ", ".join(["1"] * 400) + "]\ny = (1 +* 2)\n"
    (tmp_path / "m.py").write_text(text)
    with pytest.raises(SyntaxError) as cpython:
        compile(text, "m.py", "exec")
    code, out = _run(tmp_path, monkeypatch, command, "--no-cache" if command == "check" else "--diff", "m.py")
    assert code == 2
    assert f"m.py:{cpython.value.lineno}:{cpython.value.offset}: syntax-error: {cpython.value.msg}" in out, out


def test_the_depth_screen_measures_depth_not_line_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 5 000 terms over short lines: no long line, few operators per line, 5 000 deep
    text = FIXTURE.read_text() + "\nX = (1\n" + " + 1\n" * 4_990 + ")\n"
    (tmp_path / "m.py").write_text(text)
    for command in ("check", "fix"):
        started = time.perf_counter()
        code, out = _run(tmp_path, monkeypatch, command, "m.py")
        assert code == 2, out
        assert "too-deeply-nested: an expression nested 1001 deep is too deep to parse" in out
        assert time.perf_counter() - started < 8  # was 12 s of libcst before the refusal
    assert (tmp_path / "m.py").read_text() == text
