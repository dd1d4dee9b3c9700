"""`offlint check --add-noqa`: a suppression for every finding, written in place, every other byte
kept; afterwards the same check is clean and a second run adds nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.analysis.positions import ast_statement_spans
from offlint.cli import main
from offlint.suppression import add_directives

CAPTURED = """\
import torch


def step(x, s):
    torch.cuda.synchronize()
    n = x.sum().item()  # the count, for logging
    label = '''
''' + str(x.cpu())
    total = x.tolist()[0] + \\
        1
    torch.cuda.current_stream().synchronize()  # offlint: ignore[OFL101]
    return n, label, total


def capture(x):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.graph(g):
        step(x, s)
"""


def run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def spans(text: str) -> list[tuple[int, int]]:
    return ast_statement_spans(ast.parse(text))


def test_add_noqa_suppresses_every_finding_and_keeps_comments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "step.py"
    path.write_text(CAPTURED, encoding="utf-8")
    code, out, _ = run(tmp_path, monkeypatch)
    before = [line.split(" ")[0:2] for line in out.splitlines()]
    assert code == 1 and len(before) == 5, out
    code, out, err = run(tmp_path, monkeypatch, "--add-noqa")
    assert (code, out, err) == (0, "", "Added 5 suppressions to 1 file.\n")
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[4:13] == [
        "    torch.cuda.synchronize()  # offlint: ignore[OFL105]",
        "    n = x.sum().item()  # the count, for logging  # offlint: ignore[OFL105]",
        "    label = '''",
        "''' + str(x.cpu())  # offlint: ignore[OFL105]",
        "    # offlint: ignore[OFL105]",  # a backslash continuation: the statement is covered
        "    total = x.tolist()[0] + \\",
        "        1",
        "    torch.cuda.current_stream().synchronize()  # offlint: ignore[OFL101, OFL105]",  # merged into the directive
        "    return n, label, total",
    ]
    assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(CAPTURED))
    assert run(tmp_path, monkeypatch) == (0, "", "All checks passed!\n")
    # idempotent
    code, _, err = run(tmp_path, monkeypatch, "--add-noqa")
    assert (code, err) == (0, "Added 0 suppressions to 0 files.\n")
    assert path.read_text(encoding="utf-8") == text


def test_add_noqa_follows_the_selection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "step.py"
    path.write_text(CAPTURED.replace("  # offlint: ignore[OFL101]", ""), encoding="utf-8")
    code, _, err = run(tmp_path, monkeypatch, "--add-noqa", "--select", "OFL105", "--ignore", "OFL105")
    assert (code, err) == (0, "Added 0 suppressions to 0 files.\n")
    assert "offlint:" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("prefix", "newline", "encoding"),
    [(b"", "\r\n", "utf-8"), (b"\xef\xbb\xbf", "\n", "utf-8"), (b"", "\n", "latin-1")],
)
def test_add_noqa_keeps_line_endings_bom_and_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: bytes, newline: str, encoding: str
) -> None:
    source = CAPTURED
    if encoding == "latin-1":
        source = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + source
    data = prefix + source.replace("\n", newline).encode(encoding)
    path = tmp_path / "step.py"
    path.write_bytes(data)
    code, _, err = run(tmp_path, monkeypatch, "--add-noqa")
    assert code == 0, err
    written = path.read_bytes()
    assert written.startswith(prefix)
    assert written.count(b"offlint: ignore[") == 5
    # only directives were added: take them out again and the bytes are the original's
    body = written[len(prefix) :].decode(encoding)
    stripped = (
        body.replace(f"    # offlint: ignore[OFL105]{newline}", "")
        .replace("  # offlint: ignore[OFL105]", "")
        .replace("# offlint: ignore[OFL101, OFL105]", "# offlint: ignore[OFL101]")
    )
    assert prefix + stripped.encode(encoding) == data
    assert run(tmp_path, monkeypatch)[0] == 0


def test_add_noqa_with_stdin_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run(tmp_path, monkeypatch, "--add-noqa", "-")
    assert (code, out) == (2, "")
    assert err == "offlint: error: --add-noqa needs files, not `-` (stdin)\n"


def test_add_noqa_conflicts_with_write_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = run(tmp_path, monkeypatch, "--add-noqa", "--write-baseline", "b.json")
    assert (code, err) == (2, "offlint: error: --add-noqa and --write-baseline cannot be combined\n")


def test_add_noqa_reports_a_file_it_cannot_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "step.py"
    path.write_text(CAPTURED, encoding="utf-8")
    path.chmod(0o444)
    try:
        code, _, err = run(tmp_path, monkeypatch, "--add-noqa")
    finally:
        path.chmod(0o644)
    assert code == 2
    assert err.startswith("step.py: write-failed: file is read-only; not written\n")
    assert path.read_text(encoding="utf-8") == CAPTURED


# ---------------------------------------------------------------- add_directives itself


def test_directives_go_where_a_comment_may_stand() -> None:
    text = "x = [\n    a.item(),\n]\ny = f(  # why\n    b)\n"
    result = add_directives(text, {2: {"OFL105"}, 4: {"OFL106", "OFL105"}}, spans)
    assert result.text == (
        "x = [\n    a.item(),  # offlint: ignore[OFL105]\n]\ny = f(  # why  # offlint: ignore[OFL105, OFL106]\n    b)\n"
    )
    assert (result.added, result.unplaced) == (2, [])


def test_a_blanket_directive_already_covers_the_line() -> None:
    text = "x = a.item()  # offlint: ignore\n"
    result = add_directives(text, {1: {"OFL105"}}, spans)
    assert (result.text, result.added, result.unplaced) == (text, 0, [])


def test_a_line_inside_a_string_of_an_unparsable_file_is_unplaced() -> None:
    text = 'x = """\n' + "a\n" + '"""\nif (:\n'
    result = add_directives(text, {2: {"OFL105"}}, spans)
    assert (result.text, result.added, result.unplaced) == (text, 0, [(2, "OFL105")])
