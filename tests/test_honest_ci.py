"""Honest CI (issue 34): no false "clean" result. A file that is not Python is an error of the
run wherever it is and whatever it holds (stdin too), at `path:line:col`; a file-level
`# offlint: noqa` works; a named file is checked unless `--force-exclude`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sglang_offloader_original.py"


def _run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str, stdin: str | None = None):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(main, list(args), input=stdin)


def test_a_syntax_error_without_stream_code_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain.py").write_text("def f(:\n    return 1\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(SyntaxError) as cpython:
        compile("def f(:\n    return 1\n", "plain.py", "exec")
    result = _run(tmp_path, monkeypatch, "check", "--no-cache", ".")
    assert result.exit_code == 2
    assert f"plain.py:{cpython.value.lineno}:{cpython.value.offset}: syntax-error: {cpython.value.msg}" in result.stderr
    assert "All checks passed" not in result.stderr
    document = json.loads(_run(tmp_path, monkeypatch, "check", "--no-cache", "--output-format", "offlint-json", ".").stdout)
    (error,) = document["errors"]
    assert (error["filename"], error["row"], error["column"]) == ("plain.py", 1, cpython.value.offset)
    # ruff's json: a syntax error is an entry with no code (as ruff reports one)
    (entry,) = json.loads(_run(tmp_path, monkeypatch, "check", "--no-cache", "--output-format", "json", ".").stdout)
    assert entry["code"] is None and entry["location"] == {"row": 1, "column": cpython.value.offset}
    assert entry["filename"] == str(tmp_path.resolve() / "plain.py")


def test_a_syntax_error_is_found_on_a_warm_run_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain.py").write_text("x = (\n", encoding="utf-8")
    first = _run(tmp_path, monkeypatch, "check", ".")
    second = _run(tmp_path, monkeypatch, "check", ".")
    assert first.exit_code == second.exit_code == 2
    assert "plain.py:1:5: syntax-error:" in second.stderr


@pytest.mark.parametrize("filename", [None, "pkg/x.py"])
def test_a_syntax_error_on_stdin_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filename: str | None
) -> None:
    args = ["check", "-"] + (["--stdin-filename", filename] if filename else [])
    result = _run(tmp_path, monkeypatch, *args, stdin="y = 1\ndef f(:\n")
    assert result.exit_code == 2
    assert f"{filename or '-'}:2:7: syntax-error: invalid syntax" in result.stderr


def test_file_level_offlint_noqa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = FIXTURE.read_text(encoding="utf-8")
    (tmp_path / "all.py").write_text("# offlint: noqa\n" + source, encoding="utf-8")
    (tmp_path / "some.py").write_text("# offlint: noqa: OFL103\n" + source, encoding="utf-8")
    (tmp_path / "none.py").write_text(source, encoding="utf-8")
    result = _run(tmp_path, monkeypatch, "check", "--no-cache", "--output-format", "concise", ".")
    codes = sorted((line.split(":")[0], line.split()[1]) for line in result.stdout.splitlines())
    assert codes == [("none.py", "OFL101"), ("none.py", "OFL103"), ("some.py", "OFL101")]


def test_a_named_file_is_checked_even_where_exclude_matches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\nexclude = ["gen/**"]\n', encoding="utf-8")
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "bad.py").write_text("x = (\n", encoding="utf-8")
    named = _run(tmp_path, monkeypatch, "check", "--no-cache", "gen/bad.py")
    assert named.exit_code == 2 and "gen/bad.py:1:5: syntax-error" in named.stderr
    forced = _run(tmp_path, monkeypatch, "check", "--no-cache", "--force-exclude", "gen/bad.py")
    assert forced.exit_code == 0 and "All checks passed" not in forced.stderr
    assert "excluded by the configuration's `exclude` with --force-exclude" in forced.stderr


def test_fix_on_a_file_that_is_not_python_never_says_nothing_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bad.py").write_text("def f(:\n", encoding="utf-8")
    for args in (["fix", "bad.py"], ["check", "--diff", "bad.py"]):
        result = _run(tmp_path, monkeypatch, *args)
        assert result.exit_code == 2
        assert "bad.py:1:7: syntax-error: invalid syntax" in result.stderr
        assert "Nothing to fix." not in result.stderr
        assert "Nothing fixed: 1 file(s) could not be fixed" in result.stderr
