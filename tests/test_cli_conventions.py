"""ruff's conventions where a ruff user expects them: notebooks checked cell by cell, CI formats
(github paths from the repository root, json-lines, pylint, gitlab, junit), config discovery
(`.offlint.toml` > `offlint.toml` > pyproject.toml, closest folder wins), `--config KEY=VALUE`,
`--isolated`, the command-line `--exclude` family, the cache in the project root, `offlint clean`,
`-e`, `-s` and what `-v` says."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.notebooks import read_notebook

HOST_SYNC = (
    "import torch\n\n\ndef step(x):\n    torch.cuda.synchronize()\n    return x\n\n\n"
    "def capture(x):\n    g = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(g):\n        step(x)\n"
)
# HOST_SYNC's hazard: line 5, column 5
# a syntax error in stream code (a file with none may be settled without parsing)
BROKEN = "import torch\n\ndef f(:\n    with torch.cuda.graph(g):\n        torch.cuda.synchronize()\n"
ITEM = "import torch\n\n\ndef step(x):\n    return x.item()\n\n\ndef capture(x):\n    with torch.cuda.graph(torch.cuda.CUDAGraph()):\n        step(x)\n"


def write(path: Path, text: str = "x = 1\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def check(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    return run(cwd, monkeypatch, "check", "--no-cache", *args)


def code_cell(source: str) -> dict[str, object]:
    return {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": source.splitlines(keepends=True)}


def notebook(path: Path, *cells: dict[str, object], language: str = "python") -> Path:
    document = {"cells": list(cells), "metadata": {"language_info": {"name": language}}, "nbformat": 4, "nbformat_minor": 5}
    return write(path, json.dumps(document, indent=1))


def hazard_notebook(path: Path) -> Path:
    """Three hazards over two code cells, after a markdown cell and a magic-only cell; the
    hazards' cell has magics and a shell escape among its lines."""
    return notebook(
        path,
        {"cell_type": "markdown", "metadata": {}, "source": ["# Offloading\n"]},
        code_cell("%load_ext autoreload\n!pip install torch\nimport torch\n"),
        code_cell(
            "def step(x):\n"
            "    %time y = 1\n"
            "    torch.cuda.synchronize()\n"
            "    files = !ls\n"
            "    return x.item() + y\n"
        ),
        code_cell("%%bash\necho not python\n"),
        code_cell(
            "def capture(x):\n"
            "    g = torch.cuda.CUDAGraph()\n"
            "    with torch.cuda.graph(g):\n"
            "        step(x)\n"
            "        x.cpu()\n"
        ),
    )


# ----------------------------------------------------------------------------- notebooks


def test_the_module_a_notebook_becomes() -> None:
    document = {
        "cells": [
            {"cell_type": "markdown", "source": "text"},
            code_cell("%matplotlib inline\nx = 1\n"),
            code_cell("%%bash\nls\n"),
            code_cell("%%time\nfor i in range(3):\n    !echo $i\n    obj?\n"),
        ],
        "metadata": {},
    }
    read = read_notebook(json.dumps(document).encode())
    # magics keep their row (as `pass`, indented like them); the %%bash cell is not Python
    assert read.source == "pass\nx = 1\n\n\nfor i in range(3):\n    pass\n    pass\n"
    assert read.numbers == (2, 4)
    assert read.cell_of(2) == (2, 2)
    assert read.cell_of(6) == (4, 3)
    compile(read.source, "nb", "exec")  # what the analysis parses is Python


def test_a_notebook_with_hazards_fails_with_cell_locations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hazard_notebook(tmp_path / "nb.ipynb")
    code, out, _ = check(tmp_path, monkeypatch, "--output-format", "concise")
    assert code == 1
    # the cells' own rows: torch.cuda.synchronize() and x.item() in cell 3, x.cpu() in cell 5
    assert [" ".join(line.split(" ")[:3]) for line in out.splitlines()] == [
        "nb.ipynb:cell 3:3:5: OFL105",
        "nb.ipynb:cell 3:5:12: OFL105",
        "nb.ipynb:cell 5:5:9: OFL105",
    ]
    assert "All checks passed" not in out


@pytest.mark.parametrize(
    ("output_format", "expected"),
    [
        ("full", "nb.ipynb:cell 3:3:5: OFL105"),
        ("concise", "nb.ipynb:cell 3:3:5: OFL105"),
        ("pylint", "nb.ipynb:cell 3:3: [OFL105]"),
        ("github", "file=nb.ipynb,line=3,col=5,endLine=3,endColumn=29,title=OFL105::cell 3: "),
        ("gitlab", '"description": "OFL105: `torch.cuda.synchronize()`'),
        ("junit", 'line="3" column="5" cell="3"'),
        ("json", '"cell": 3'),
        ("json-lines", '"cell": 3'),
        ("sarif", '"text": "cell 3: `torch.cuda.synchronize()`'),
    ],
)
def test_every_format_names_the_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output_format: str, expected: str
) -> None:
    (tmp_path / ".git").mkdir()
    hazard_notebook(tmp_path / "nb.ipynb")
    code, out, _ = check(tmp_path, monkeypatch, "--output-format", output_format)
    assert code == 1
    assert expected in out


def test_the_full_format_frames_the_cell_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hazard_notebook(tmp_path / "nb.ipynb")
    _, out, _ = check(tmp_path, monkeypatch, "--output-format", "full")
    assert "2 |     %time y = 1\n3 |     torch.cuda.synchronize()\n" in out  # the cell's rows, magics as written


def test_a_notebook_is_cached_with_its_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hazard_notebook(tmp_path / "nb.ipynb")
    runs = [run(tmp_path, monkeypatch, "check", "--output-format", "concise") for _ in range(2)]
    assert runs[0][0] == runs[1][0] == 1
    assert runs[0][1] == runs[1][1]
    assert "cell 3:3:5" in runs[1][1]
    assert (tmp_path / ".offlint_cache").is_dir()


def test_a_clean_notebook_and_a_non_python_kernel_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook(tmp_path / "clean.ipynb", code_cell("import torch\nx = torch.ones(3)\n"))
    notebook(tmp_path / "r.ipynb", code_cell("torch.cuda.synchronize()\n"), language="R")
    code, out, err = check(tmp_path, monkeypatch)
    assert code == 0, out + err


def test_a_broken_notebook_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "bad.ipynb", '{"cells": [')
    code, out, err = check(tmp_path, monkeypatch)
    assert code == 2
    assert "bad.ipynb" in err and "not a notebook" in err
    assert "Traceback" not in out + err


def test_a_syntax_error_in_a_cell_names_the_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook(tmp_path / "nb.ipynb", code_cell("import torch\n"), code_cell("x = 1\n" + BROKEN))
    code, out, _ = check(tmp_path, monkeypatch, "--output-format", "offlint-json")
    assert code == 2
    (error,) = json.loads(out)["errors"]
    assert error["kind"] == "syntax-error" and error["cell"] == 2
    assert error["row"] is not None and error["row"] <= 6  # the cell's rows


def test_fix_leaves_a_notebook_unchanged_with_one_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = hazard_notebook(tmp_path / "nb.ipynb")
    before = path.read_bytes()
    for args in (("fix", "--apply", "."), ("fix", "."), ("check", "--no-cache", "--fix", "."), ("check", "--no-cache", "--add-noqa", ".")):
        _, _, err = run(tmp_path, monkeypatch, *args)
        assert err.count("nb.ipynb") >= 1 and "not fixable in notebooks yet" in err, (args, err)
        assert "Traceback" not in err
        assert path.read_bytes() == before, args


def test_a_notebook_finding_offers_no_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hazard_notebook(tmp_path / "nb.ipynb")
    _, out, _ = check(tmp_path, monkeypatch, "--output-format", "offlint-json", "--min-confidence", "low")
    assert all(d["fix"] is None for d in json.loads(out)["diagnostics"])


# ----------------------------------------------------------------------------- formats


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree whose code lives under python/ (SGLang's layout)."""
    (tmp_path / ".git").mkdir()
    write(tmp_path / "python" / "pkg" / "a.py", HOST_SYNC)
    return tmp_path


def test_github_paths_start_at_the_repository_root(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an Actions job with `working-directory: python`
    code, out, _ = check(repo / "python", monkeypatch, "--output-format", "github", "pkg")
    assert code == 1
    assert out.startswith("::error file=python/pkg/a.py,line=5,col=5,")


def test_github_paths_without_git_start_at_the_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "pyproject.toml", "[tool.offlint]\n")
    write(tmp_path / "src" / "a.py", HOST_SYNC)
    _, out, _ = check(tmp_path / "src", monkeypatch, "--output-format", "github", ".")
    assert "file=src/a.py," in out


def test_json_lines_is_one_json_diagnostic_per_line(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "python" / "pkg" / "b.py", ITEM)
    _, out, _ = check(repo / "python", monkeypatch, "--output-format", "json-lines")
    _, whole, _ = check(repo / "python", monkeypatch, "--output-format", "offlint-json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines == json.loads(whole)["diagnostics"]
    assert [d["code"] for d in lines] == ["OFL105", "OFL105"]


def test_pylint_lines(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, out, _ = check(repo / "python", monkeypatch, "--output-format", "pylint")
    assert out.splitlines() == [
        "pkg/a.py:5: [OFL105] `torch.cuda.synchronize()` synchronises with the host in capture-reachable code "
        "(cudaErrorStreamCaptureUnsupported)"
    ]


def test_gitlab_code_quality(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "python" / "pkg" / "b.py", HOST_SYNC)  # the same line in another file: another issue
    write(repo / "python" / "pkg" / "broken.py", BROKEN)
    code, out, _ = check(repo / "python", monkeypatch, "--output-format", "gitlab")
    assert code == 2
    issues = json.loads(out)
    first = issues[0]
    assert set(first) == {"description", "check_name", "fingerprint", "severity", "location"}
    assert first["check_name"] == "OFL105" and first["severity"] == "critical"
    assert first["description"].startswith("OFL105: ")
    assert first["location"] == {"path": "python/pkg/a.py", "lines": {"begin": 5, "end": 5}}
    assert len({issue["fingerprint"] for issue in issues}) == len(issues) == 3
    assert issues[2]["check_name"] == "offlint/syntax-error" and issues[2]["location"]["path"] == "python/pkg/broken.py"


def test_gitlab_fingerprints_survive_lines_moving(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, before, _ = check(repo / "python", monkeypatch, "--output-format", "gitlab")
    write(repo / "python" / "pkg" / "a.py", "# a comment\n\n" + HOST_SYNC)
    _, after, _ = check(repo / "python", monkeypatch, "--output-format", "gitlab")
    assert json.loads(before)[0]["fingerprint"] == json.loads(after)[0]["fingerprint"]
    assert json.loads(after)[0]["location"]["lines"]["begin"] == 7


def test_junit_xml(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "python" / "pkg" / "broken.py", BROKEN)
    _, out, _ = check(repo / "python", monkeypatch, "--output-format", "junit")
    suites = ET.fromstring(out)
    assert suites.tag == "testsuites"
    assert (suites.get("tests"), suites.get("failures"), suites.get("errors")) == ("2", "1", "1")
    failing = suites.find("testsuite[@name='pkg/a.py']/testcase")
    assert failing is not None and failing.get("name") == "offlint.OFL105" and failing.get("line") == "5"
    failure = failing.find("failure")
    assert failure is not None and failure.get("type") == "OFL105"
    assert suites.find("testsuite[@name='pkg/broken.py']/testcase/error") is not None


def test_junit_of_a_clean_run_is_one_passing_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "a.py")
    code, out, _ = check(tmp_path, monkeypatch, "--output-format", "junit")
    assert code == 0
    suites = ET.fromstring(out)
    assert (suites.get("tests"), suites.get("failures")) == ("1", "0")


# ----------------------------------------------------------------------------- config discovery


def selected(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> list[str]:
    code, out, err = check(cwd, monkeypatch, "--output-format", "concise", *args)
    assert code in (0, 1), err
    return sorted(f"{line.split(':')[0]} {line.split(' ')[1]}" for line in out.splitlines())


def test_config_files_precedence_in_one_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "a.py", HOST_SYNC)
    write(tmp_path / "pyproject.toml", '[tool.offlint]\nignore = ["OFL105"]\n')
    assert selected(tmp_path, monkeypatch) == []
    write(tmp_path / "offlint.toml", "")  # offlint.toml over pyproject.toml (even empty)
    assert selected(tmp_path, monkeypatch) == ["a.py OFL105"]
    write(tmp_path / ".offlint.toml", 'ignore = ["OFL1"]\n')  # .offlint.toml over offlint.toml
    assert selected(tmp_path, monkeypatch) == []


def test_the_closest_folder_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "offlint.toml", 'ignore = ["OFL105"]\n')
    write(tmp_path / "a.py", HOST_SYNC)
    write(tmp_path / "sub" / "a.py", HOST_SYNC)
    write(tmp_path / "sub" / "pyproject.toml", "[tool.offlint]\n")
    write(tmp_path / "other" / "pyproject.toml", "[project]\nname = 'x'\n")  # no table: not a config
    write(tmp_path / "other" / "a.py", HOST_SYNC)
    assert selected(tmp_path, monkeypatch) == ["sub/a.py OFL105"]


def test_config_key_value_overrides_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "offlint.toml", 'ignore = ["OFL105"]\n')
    write(tmp_path / "a.py", HOST_SYNC)
    write(tmp_path / "sub" / ".offlint.toml", 'ignore = ["OFL105"]\n')
    write(tmp_path / "sub" / "a.py", HOST_SYNC)
    assert selected(tmp_path, monkeypatch, "--config", "ignore = []") == ["a.py OFL105", "sub/a.py OFL105"]
    # repeatable, and a file still works alongside
    write(tmp_path / "ci.toml", 'ignore = ["OFL101"]\n')
    assert selected(tmp_path, monkeypatch, "--config", "ci.toml", "--config", 'select = ["OFL105"]') == [
        "a.py OFL105",
        "sub/a.py OFL105",
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("selec = []", "--config: unknown key [tool.offlint] selec (did you mean `select`?)"),
        ('select = ["OFL999"]', "--config: 'OFL999' matches no rule"),
        ("select = [", "--config 'select = [': neither a config file nor a TOML `key = value`"),
    ],
)
def test_bad_config_overrides_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    write(tmp_path / "a.py")
    code, _, err = check(tmp_path, monkeypatch, "--config", value)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_isolated_reads_no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "offlint.toml", 'ignore = ["OFL105"]\nexclude = ["a.py"]\n')
    write(tmp_path / "a.py", HOST_SYNC)
    assert selected(tmp_path, monkeypatch) == []
    assert selected(tmp_path, monkeypatch, "--isolated") == ["a.py OFL105"]
    # a broken config is not even read
    write(tmp_path / "offlint.toml", "select = [\n")
    assert selected(tmp_path, monkeypatch, "--isolated") == ["a.py OFL105"]
    code, _, err = check(tmp_path, monkeypatch, "--isolated", "--config", "offlint.toml")
    assert code == 2 and "--isolated" in err


def test_exclude_options_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "offlint.toml", 'exclude = ["gen"]\n')
    for folder in ("gen", "vendor", "pkg"):
        write(tmp_path / folder / "a.py", HOST_SYNC)
    assert selected(tmp_path, monkeypatch) == ["pkg/a.py OFL105", "vendor/a.py OFL105"]
    assert selected(tmp_path, monkeypatch, "--extend-exclude", "vendor") == ["pkg/a.py OFL105"]
    # --exclude replaces the config's
    assert selected(tmp_path, monkeypatch, "--exclude", "vendor,pkg") == ["gen/a.py OFL105"]


def test_per_file_ignores_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in ("tests", "pkg"):
        write(tmp_path / folder / "a.py", HOST_SYNC)
    assert selected(tmp_path, monkeypatch, "--per-file-ignores", "tests/*:OFL105,OFL101") == ["pkg/a.py OFL105"]
    code, _, err = check(tmp_path, monkeypatch, "--per-file-ignores", "tests")
    assert code == 2 and "GLOB:CODE" in err


def test_an_unknown_code_in_a_config_names_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n\n[tool.offlint]\nmin-confidence = "low"\nselect = ["OFL999"]\n')
    write(tmp_path / "a.py")
    code, _, err = check(tmp_path, monkeypatch)
    assert code == 2
    assert f"{tmp_path / 'pyproject.toml'}:6: 'OFL999' matches no rule" in err
    write(tmp_path / "offlint.toml", 'ignore = [\n  "OFL101",\n]\nextend-select = ["OFL998"]\n')
    code, _, err = check(tmp_path, monkeypatch)
    assert f"{tmp_path / 'offlint.toml'}:4: 'OFL998'" in err


# ----------------------------------------------------------------------------- cache


def test_the_cache_lives_in_the_project_root(repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    code, _, _ = run(repo / "python" / "pkg", monkeypatch, "check", "-q", ".")
    assert code == 1
    assert (repo / ".offlint_cache").is_dir() and not (repo / "python" / "pkg" / ".offlint_cache").exists()
    # the same tree checked from elsewhere finds it warm
    code, _, err = run(elsewhere, monkeypatch, "check", "-v", str(repo / "python"))
    assert code == 1
    assert f"cache {repo / '.offlint_cache'}" in err
    assert "1 reused from the cache" in err and "0 analysed" in err
    assert not (elsewhere / ".offlint_cache").exists()


def test_cache_dir_option_and_environment(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(repo, monkeypatch, "check", "-q", "--cache-dir", "c1", ".")
    run(repo, monkeypatch, "check", "-q", ".", env={"OFFLINT_CACHE_DIR": "c2"})
    assert (repo / "c1" / "CACHEDIR.TAG").is_file() and (repo / "c2" / "CACHEDIR.TAG").is_file()
    assert not (repo / ".offlint_cache").exists()


def test_clean_removes_the_caches_of_the_project_only(repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    run(repo, monkeypatch, "check", "-q", ".")
    run(repo / "python", monkeypatch, "check", "-q", "--cache-dir", "own", ".")
    run(repo, monkeypatch, "check", "-q", "--cache-dir", str(outside / "cache"), ".")
    mine = write(repo / "python" / "notes" / ".offlint_cache" / "keep.txt", "mine\n")  # not offlint's files
    code, out, err = run(repo / "python", monkeypatch, "clean", "--cache-dir", "own")
    assert code == 0
    assert f"Removed {repo / '.offlint_cache'}" in out and f"Removed {repo / 'python' / 'own'}" in out
    assert not (repo / ".offlint_cache").exists() and not (repo / "python" / "own").exists()
    assert mine.is_file() and "left" in err  # never a folder holding someone else's files
    code, _, err = run(repo, monkeypatch, "clean", "--cache-dir", str(outside / "cache"))
    assert (outside / "cache").is_dir() and "outside the project root" in err
    mine.unlink()
    code, out, _ = run(repo, monkeypatch, "clean")
    assert code == 0 and f"Removed {mine.parent}" in out  # empty now: nothing that is not offlint's
    code, out, _ = run(repo, monkeypatch, "clean")
    assert code == 0 and "No cache under" in out


# ----------------------------------------------------------------------------- -e, -s, -v


def test_exit_zero_and_silent_short_flags(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = check(repo, monkeypatch, "-e")
    assert code == 0 and "OFL105" in out
    code, out, err = check(repo, monkeypatch, "-s")
    assert (code, out, err) == (1, "", "")
    write(repo / "python" / "broken.py", BROKEN)
    code, out, err = check(repo, monkeypatch, "-s")
    assert (code, out, err) == (2, "", "")
    code, _, err = check(repo, monkeypatch, "-s", "-v")
    assert code == 2 and "cannot be combined" in err


def test_verbose_says_where_and_what_became_of_the_files(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "python" / "plain.py")  # nothing a hazard could be in: never parsed
    write(repo / "offlint.toml", "")
    code, _, err = run(repo, monkeypatch, "check", "-v", "--config", "min-confidence = 'low'", ".")
    assert code == 1
    assert f"offlint: project root {repo}\n" in err
    assert f"offlint: config {repo / 'offlint.toml'}: 2 files" in err
    assert "set on the command line: min-confidence" in err
    assert "2 files checked in" in err and "1 analysed; 1 without possible hazards (not parsed)" in err
    assert "parsed, " not in err  # the old "2 parsed, 2 from cache"
    _, _, err = run(repo, monkeypatch, "check", "-v", ".")
    assert "0 analysed; 2 reused from the cache" in err


def test_show_settings_names_the_cache(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run(repo / "python", monkeypatch, "check", "--show-settings", ".")
    assert code == 0
    assert re.search(rf"^cache +{re.escape(str(repo / '.offlint_cache'))}$", out, re.MULTILINE)


def test_a_suppression_in_a_cell_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = hazard_notebook(tmp_path / "nb.ipynb")
    document = json.loads(path.read_text(encoding="utf-8"))
    lines = document["cells"][2]["source"]
    lines[2] = lines[2].rstrip("\n") + "  # offlint: ignore[OFL105]\n"
    path.write_text(json.dumps(document), encoding="utf-8")
    _, out, _ = check(tmp_path, monkeypatch, "--output-format", "concise")
    assert "cell 3:3:5" not in out and "cell 3:5:12" in out


def test_a_notebook_on_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = hazard_notebook(tmp_path / "nb.ipynb").read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--stdin-filename", "piped.ipynb", "--output-format", "full"], input=data)
    assert result.exit_code == 1
    assert "piped.ipynb:cell 3:3:5: OFL105" in result.stdout
    assert "3 |     torch.cuda.synchronize()" in result.stdout  # the frame from the piped cells


# ----------------------------------------------------------------------------- docs in step


DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_output_format_is_documented() -> None:
    from offlint.reporting import OUTPUT_FORMATS

    text = (DOCS / "output-formats.md").read_text(encoding="utf-8")
    assert sorted(re.findall(r"^## `([a-z][a-z-]*)`", text, re.MULTILINE)) == sorted(OUTPUT_FORMATS)


def test_every_configuration_option_is_documented() -> None:
    import click

    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    command = main.get_command(click.Context(main), "check")
    assert command is not None
    for name in ("--config", "--isolated", "--exclude", "--extend-exclude", "--per-file-ignores", "--cache-dir",
                 "OFFLINT_CACHE_DIR", "offlint clean", "--exit-zero", "--silent", "--no-cache", "--verbose"):
        assert name in text, name
        if name.startswith("--"):
            assert any(name in param.opts for param in command.params), name
