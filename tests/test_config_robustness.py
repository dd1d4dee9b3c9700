"""Configuration a user gets wrong: every mistake is one line naming the file, the line and the key
(with a suggestion for a misspelt key, in every table), never a traceback (issue 15, item 8)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.config import ConfigError, KeyLines, load_config_file

HOST_SYNC = (
    "import torch\n\n\ndef step(x):\n    torch.cuda.synchronize()\n    return x\n\n\n"
    "def capture(x):\n    g = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(g):\n        step(x)\n"
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def check(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def error_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pyproject: str) -> str:
    write(tmp_path / "pyproject.toml", pyproject)
    write(tmp_path / "a.py", HOST_SYNC)
    code, out, err = check(tmp_path, monkeypatch)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    prefix = f"offlint: error: {(tmp_path / 'pyproject.toml').resolve()}"
    assert err.startswith(prefix), err
    return err[len(prefix) :].rstrip("\n")


# ---------------------------------------------------------------- deep nesting


@pytest.mark.parametrize("depth", [500, 5_000, 200_000])
@pytest.mark.parametrize("where", ["tool.offlint", "project"])
def test_deeply_nested_arrays_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, depth: int, where: str
) -> None:
    nested = "[" * depth + "]" * depth
    key = "capture-reachable" if where == "tool.offlint" else "deep"
    text = f"[{where}]\n{key} = {nested}\n"
    if where == "project":
        text += "[tool.offlint]\n"
    message = error_of(tmp_path, monkeypatch, text)
    assert message == ": invalid TOML: arrays or tables nested too deeply to read"


def test_deeply_nested_inline_tables_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nested = "{a = " * 2_000 + "1" + "}" * 2_000
    message = error_of(tmp_path, monkeypatch, f"[tool.offlint]\nfix = {nested}\n")
    assert "nested too deeply" in message


def test_deep_nesting_in_a_subprocess_never_shows_a_traceback(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.offlint]\nselect = " + "[" * 1000 + "]" * 1000 + "\n")
    write(tmp_path / "a.py", HOST_SYNC)
    done = subprocess.run(
        [sys.executable, "-m", "offlint", "check", "--no-cache", "a.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert done.stderr.endswith(": invalid TOML: arrays or tables nested too deeply to read\n")


# ---------------------------------------------------------------- wrong types


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('select = "OFL101"', 'select must be a list of strings, not a string (write ["OFL101"])'),
        ('ignore = "OFL1"', "ignore must be a list of strings, not a string"),
        ('extend-select = "OFL2"', "extend-select must be a list of strings, not a string"),
        ('exclude = "gen"', "exclude must be a list of strings, not a string"),
        ("extend-exclude = 3", "extend-exclude must be a list of strings, not a number"),
        ('capture-reachable = "step"', "capture-reachable must be a list of strings, not a string"),
        ('respect-gitignore = "false"', "respect-gitignore must be true or false, not a string"),
        ("force-exclude = 0", "force-exclude must be true or false, not a number"),
        ('min-confidence = "sure"', "min-confidence must be one of high, medium, low"),
        ("fix = 1", "fix must be a table"),
    ],
)
def test_wrong_types_are_errors_with_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, message: str
) -> None:
    got = error_of(tmp_path, monkeypatch, f'[project]\nname = "x"\n\n[tool.offlint]\n{line}\n')
    assert got.startswith(":5: [tool.offlint] "), got
    assert message in got


def test_per_file_ignores_value_must_be_a_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = error_of(tmp_path, monkeypatch, '[tool.offlint]\n[tool.offlint.per-file-ignores]\n"gen/*" = "OFL1"\n')
    assert got == ":2: [tool.offlint] per-file-ignores.'gen/*' must be a list of strings, not a string (write [\"OFL1\"])"


# ---------------------------------------------------------------- typos, in every table


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[tool.offlint]\nselect = ["OFL1"]\nextend_select = ["OFL2"]\n', ":3: unknown key [tool.offlint] extend_select (did you mean `extend-select`?)"),
        ('[tool.offlint]\nexlude = ["gen"]\n', ":2: unknown key [tool.offlint] exlude (did you mean `exclude`?)"),
        ('[tool.offlint]\n\n[tool.offlint.fix]\nstratgy = "inline"\n', ":4: unknown key [tool.offlint.fix] stratgy (did you mean `strategy`?)"),
        ('[tool.offlint]\nfix.stratgy = "inline"\n', ":2: unknown key [tool.offlint.fix] stratgy (did you mean `strategy`?)"),
        ('[tool.offlint]\nfix = { stratgy = "inline" }\n', ":2: unknown key [tool.offlint.fix] stratgy (did you mean `strategy`?)"),
        ("[tool.offlint.probe]\nreplay = 3\n", ":2: unknown key [tool.offlint.probe] replay (did you mean `replays`?)"),
        ("[tool.offlint.probe]\nbatch_size = [8]\n", ":2: unknown key [tool.offlint.probe] batch_size (did you mean `batch-sizes`?)"),
        ("[tool.offlint.fixx]\nstrategy = 1\n", ":1: unknown key [tool.offlint] fixx (did you mean `fix`?)"),
        ('[tool.offlint]\ncompletely-different = 1\n', ":2: unknown key [tool.offlint] completely-different"),
    ],
)
def test_typos_name_the_line_and_suggest_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    assert error_of(tmp_path, monkeypatch, text) == expected


def test_probe_spellings_the_probe_accepts_are_no_typos(tmp_path: Path) -> None:
    path = write(tmp_path / "pyproject.toml", "[tool.offlint.probe]\nbatch_sizes = [8]\ngpus = [0]\nreplays = 2\n")
    assert load_config_file(path).probe == {"batch_sizes": [8], "gpus": [0], "replays": 2}


def test_offlint_toml_errors_name_the_line_too(tmp_path: Path) -> None:
    path = write(tmp_path / "offlint.toml", '# settings\nselect = ["OFL1"]\nignroe = ["OFL105"]\n')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(info.value) == f"{path.resolve()}:3: unknown key [tool.offlint] ignroe (did you mean `ignore`?)"


def test_target_torch_is_removed_with_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = error_of(tmp_path, monkeypatch, '[tool.offlint]\ntarget-torch = "2.11"\n')
    assert got.startswith(":2: [tool.offlint] target-torch: it was removed: no rule depends on the PyTorch version")


def test_key_lines_reads_headers_dotted_keys_and_quotes() -> None:
    text = (
        '[project]\nname = "x"\n[tool.offlint]\nselect = []\n"per-file-ignores"."a/*" = []\n'
        "[tool.offlint.fix]  # comment\nstrategy = 'auto'\n[[tool.other]]\nx = 1\n"
    )
    lines = KeyLines(text, ("tool", "offlint"))
    assert lines.line_of("select") == 4
    assert lines.line_of("per-file-ignores") == 5
    assert lines.line_of("fix") == 6
    assert lines.line_of("fix", "strategy") == 7
    assert lines.line_of("nowhere") is None
    assert KeyLines(None, ()).line_of("select") is None
