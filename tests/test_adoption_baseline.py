"""`--write-baseline FILE` / `--baseline FILE`: known findings stay quiet wherever their line moves;
a new finding (another line, another rule, another copy of a known line) fails the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.baseline import FORMAT, Baseline, line_hash
from offlint.cli import main
from tests.sources import HOST_SYNC

STEP = HOST_SYNC


def run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "step.py").write_text(STEP, encoding="utf-8")
    return tmp_path


def test_write_then_check_against_the_baseline(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run(project, monkeypatch, "--write-baseline", "offlint-baseline.json")
    assert (code, out, err) == (0, "", "Wrote 2 findings to offlint-baseline.json.\n")
    document = json.loads((project / "offlint-baseline.json").read_text(encoding="utf-8"))
    assert document["format"] == FORMAT
    assert [(f["path"], f["code"], f["line"]) for f in document["findings"]] == [
        ("pkg/step.py", "OFL105", 5),
        ("pkg/step.py", "OFL105", 6),
    ]
    assert document["findings"][0]["line_hash"] == line_hash("    torch.cuda.synchronize()")
    code, out, err = run(project, monkeypatch, "--baseline", "offlint-baseline.json")
    assert (code, out) == (0, "")
    assert err == "All checks passed!\n2 findings in the baseline (offlint-baseline.json) not shown.\n"


def test_moved_lines_stay_matched_and_new_findings_fail(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(project, monkeypatch, "--write-baseline", "b.json")
    step = project / "pkg" / "step.py"
    # lines added above and the body reindented: still the same findings
    moved = STEP.replace("import torch\n", "import torch\nimport os\n\n\n").replace(
        "    torch.cuda.synchronize()", "    if True:\n        torch.cuda.synchronize()"
    )
    step.write_text(moved, encoding="utf-8")
    assert run(project, monkeypatch, "--baseline", "b.json")[:2] == (0, "")
    # a second copy of a known line is new, and so is a new line
    step.write_text(
        moved.replace("    return x * n", "    torch.cuda.synchronize()\n    m = x.max().item()\n    return x * n"),
        encoding="utf-8",
    )
    code, out, err = run(project, monkeypatch, "--baseline", "b.json")
    assert code == 1
    assert [line.split(" ")[0] for line in out.splitlines()] == ["pkg/step.py:11:5:", "pkg/step.py:12:9:"]
    assert err == "Found 2 errors.\n2 findings in the baseline (b.json) not shown.\n"


def test_paths_are_relative_to_the_baseline_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "ci").mkdir()
    run(project, monkeypatch, "--write-baseline", "ci/base.json")
    paths = {f["path"] for f in json.loads((project / "ci" / "base.json").read_text())["findings"]}
    assert paths == {"../pkg/step.py"}
    # run from elsewhere: the same findings are known
    code, out, _ = run(project / "pkg", monkeypatch, "--baseline", "../ci/base.json", ".")
    assert (code, out) == (0, "")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "b.json: baseline not found (write one with --write-baseline b.json)"),
        ("{", "b.json: not a baseline (invalid JSON)"),
        ('{"findings": []}', 'b.json: not an offlint baseline (expected "format": "offlint-baseline/1")'),
        ('{"format": "offlint-baseline/1", "findings": {}}', "b.json: baseline `findings` must be a list"),
        (
            '{"format": "offlint-baseline/1", "findings": [{"path": "a.py", "code": "OFL105"}]}',
            "b.json: baseline finding 1 needs path, code and line_hash strings",
        ),
        ("[" * 100_000 + "]" * 100_000, "b.json: not a baseline (invalid JSON)"),
    ],
)
def test_a_bad_baseline_is_one_line(project: Path, monkeypatch: pytest.MonkeyPatch, content: str | None, message: str) -> None:
    if content is not None:
        (project / "b.json").write_text(content, encoding="utf-8")
    code, out, err = run(project, monkeypatch, "--baseline", "b.json")
    assert (code, out, err) == (2, "", f"offlint: error: {message}\n")


def test_write_baseline_to_an_unwritable_place(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = run(project, monkeypatch, "--write-baseline", "no/such/dir/b.json")
    assert code == 2
    assert err.startswith("offlint: error: cannot write no/such/dir/b.json: ")


def test_baseline_counts_identical_entries(tmp_path: Path) -> None:
    entry = {"path": "a.py", "code": "OFL105", "line_hash": "0" * 16}
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"format": FORMAT, "findings": [entry, entry]}), encoding="utf-8")
    assert sum(Baseline.load(path).entries.values()) == 2
