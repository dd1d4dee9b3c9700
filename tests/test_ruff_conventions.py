"""The ruff conventions of issue 34, each typed as a user would type it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.catalogue import load_catalogue
from offlint.cli import main

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sglang_offloader_original.py"
RECORD = Path(__file__).resolve().parent.parent / "fixtures" / "golden" / "record_stream" / "in.py"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "offload.py").write_bytes(FIXTURE.read_bytes())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def offlint(*args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args), env=env)


def test_rule_all_and_rule_json() -> None:
    catalogue = load_catalogue()
    text = offlint("rule", "--all")
    assert text.exit_code == 0
    assert [line for line in text.stdout.splitlines() if line.startswith("# ")] == [
        f"# {spec.name} ({spec.code})" for spec in catalogue.values()
    ]
    rows = json.loads(offlint("rule", "--all", "--output-format", "json").stdout)
    assert [row["code"] for row in rows] == list(catalogue)
    one = json.loads(offlint("rule", "OFL101", "--output-format", "json").stdout)
    assert one["code"] == "OFL101" and one["linter"] == "offlint"
    assert one["explanation"] == catalogue["OFL101"].markdown()
    assert one["fix"] == "Fix is sometimes available."
    neither = offlint("rule")
    assert neither.exit_code == 2 and "give a rule CODE or --all" in neither.stderr


def test_did_you_mean_for_an_unknown_subcommand() -> None:
    result = offlint("chekc", ".")
    assert result.exit_code == 2
    assert "unknown command 'chekc' (did you mean `offlint check`?)" in result.stderr
    assert "Traceback" not in result.output


def test_output_format_from_the_environment(project: Path) -> None:
    grouped = offlint("check", "--no-cache", env={"OFFLINT_OUTPUT_FORMAT": "grouped"})
    assert grouped.stdout.splitlines()[0] == "offload.py:"
    assert grouped.stdout.splitlines()[1].startswith("  149:9 OFL103 [*] ")
    # the command line wins over the environment
    concise = offlint("check", "--no-cache", "--output-format", "concise", env={"OFFLINT_OUTPUT_FORMAT": "grouped"})
    assert concise.stdout.startswith("offload.py:149:9: OFL103")
    bad = offlint("check", env={"OFFLINT_OUTPUT_FORMAT": "xml"})
    assert bad.exit_code == 2 and "Invalid value for '--output-format'" in bad.stderr


def test_json_is_ruffs_list_and_offlint_json_the_object(project: Path) -> None:
    entries = json.loads(offlint("check", "--no-cache", "--output-format", "json").stdout)
    assert isinstance(entries, list) and [e["code"] for e in entries] == ["OFL103", "OFL101"]
    first = entries[0]
    assert set(first) == {"cell", "code", "end_location", "filename", "fix", "location", "message", "noqa_row", "url"}
    assert first["filename"] == str(project.resolve() / "offload.py")
    assert first["location"] == {"row": 149, "column": 9} and first["noqa_row"] == 149
    assert first["fix"]["applicability"] == "unsafe" and first["fix"]["edits"]
    assert first["url"].endswith("/rules/OFL103.md")
    document = json.loads(offlint("check", "--no-cache", "--output-format", "offlint-json").stdout)
    assert document["schema"] == "offlint-json/1" and len(document["diagnostics"]) == 2


def test_rdjson_and_azure(project: Path) -> None:
    rd = json.loads(offlint("check", "--no-cache", "--output-format", "rdjson").stdout)
    assert rd["source"]["name"] == "offlint"
    (first, _) = rd["diagnostics"]
    assert first["code"]["value"] == "OFL103" and first["location"]["path"] == "offload.py"
    assert first["location"]["range"]["start"] == {"line": 149, "column": 9}
    assert first["suggestions"] and first["severity"] == "ERROR"
    azure = offlint("check", "--no-cache", "--output-format", "azure").stdout.splitlines()
    assert azure[0].startswith(
        "##vso[task.logissue type=error;sourcepath=offload.py;linenumber=149;columnnumber=9;code=OFL103;]"
    )
    assert len(azure) == 2


def test_diff_never_says_nothing_to_fix_where_unsafe_fixes_exist(project: Path) -> None:
    result = offlint("check", "--no-cache", "--diff")
    assert result.exit_code == 0 and result.stdout == ""
    assert "Nothing to fix." not in result.stderr
    assert "No safe fixes; 2 findings have unsafe fixes (`offlint check --diff --unsafe-fixes` shows them)." in result.stderr
    stdin = CliRunner().invoke(main, ["check", "--diff", "-"], input=FIXTURE.read_text())
    assert "Nothing to fix." not in stdin.stderr and "No safe fixes" in stdin.stderr


def test_fix_only_and_exit_non_zero_on_fix(project: Path) -> None:
    original = (project / "offload.py").read_text()
    fixed_only = offlint("check", "--no-cache", "--fix-only", "--unsafe-fixes")
    assert (fixed_only.exit_code, fixed_only.stdout) == (0, "")
    assert "Fixed 1 file(s)" in fixed_only.stderr
    assert (project / "offload.py").read_text() != original
    (project / "offload.py").write_text(original)
    loud = offlint("check", "--no-cache", "--fix-only", "--unsafe-fixes", "--exit-non-zero-on-fix")
    assert loud.exit_code == 1
    again = offlint("check", "--no-cache", "--fix-only", "--unsafe-fixes", "--exit-non-zero-on-fix")
    assert again.exit_code == 0  # nothing left to fix: nothing written
    (project / "offload.py").write_text(original)
    fixed = offlint("check", "--no-cache", "--fix", "--unsafe-fixes", "--exit-non-zero-on-fix")
    assert fixed.exit_code == 1 and "All checks passed!" in fixed.stderr
    alone = offlint("check", "--exit-non-zero-on-fix")
    assert alone.exit_code == 2 and "goes with --fix" in alone.stderr


def test_fixable_and_unfixable(project: Path) -> None:
    shutil.copy(RECORD, project / "record.py")
    (project / "pyproject.toml").write_text('[tool.offlint]\nunfixable = ["OFL204"]\n', encoding="utf-8")
    shown = offlint("check", "--no-cache", "--output-format", "concise", "record.py")
    assert "OFL204" in shown.stdout and "[*]" not in shown.stdout
    before = (project / "record.py").read_text()
    offlint("check", "--no-cache", "--fix", "record.py")
    assert (project / "record.py").read_text() == before  # OFL204 is unfixable here
    (project / "pyproject.toml").write_text('[tool.offlint]\nfixable = ["OFL2"]\n', encoding="utf-8")
    offlint("check", "--no-cache", "--fix", "record.py")
    assert (project / "record.py").read_text() != before
    (project / "record.py").write_text(before)
    offlint("check", "--no-cache", "--fix", "--unfixable", "OFL204", "record.py")
    assert (project / "record.py").read_text() == before  # the command line replaces the config's


def test_extend_for_monorepos(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.offlint]\nignore = ["OFL103"]\nextend-exclude = ["gen/**"]\n')
    package = project / "packages" / "serving"
    (package / "gen").mkdir(parents=True)
    (package / "old").mkdir()
    (package / "pyproject.toml").write_text('[tool.offlint]\nextend = "../../pyproject.toml"\nextend-exclude = ["old/**"]\n')
    for where in (package, package / "gen", package / "old"):
        (where / "offload.py").write_bytes(FIXTURE.read_bytes())
    result = offlint("check", "--no-cache", "--output-format", "concise", "packages")
    # the shared file's `ignore` and both files' `extend-exclude` apply to the package
    assert [line.split(" ")[0:2] for line in result.stdout.splitlines()] == [["packages/serving/offload.py:161:9:", "OFL101"]]
    (project / "pyproject.toml").write_text('[tool.offlint]\nextend = "packages/serving/pyproject.toml"\n')
    cycle = offlint("check", "--no-cache", "packages")
    assert cycle.exit_code == 2 and "makes a cycle" in cycle.stderr
    (package / "pyproject.toml").write_text('[tool.offlint]\nextend = "nowhere.toml"\n')
    missing = offlint("check", "--no-cache", "packages")
    assert missing.exit_code == 2 and "no such file" in missing.stderr


def test_progress_when_asked_and_never_with_quiet(project: Path) -> None:
    asked = offlint("check", "--no-cache", "--progress")
    lines = asked.stderr.splitlines()
    assert "offlint: analysing: 1/1 files" in lines
    assert asked.stdout and not any(line.startswith("offlint: analysing") for line in asked.stdout.splitlines())
    assert "offlint: analysing" not in offlint("check", "--no-cache").stderr  # not a terminal
    assert "offlint: analysing" not in offlint("check", "--no-cache", "--progress", "-q").stderr


def test_not_fixed_gives_the_reason_not_the_finding_again(capsys: pytest.CaptureFixture[str]) -> None:
    from offlint.diagnostics import Diagnostic, FixSafety, Location
    from offlint.fixing.apply import FileFix
    from offlint.pipeline.fix import _listing

    left = Diagnostic(
        path="m.py", location=Location(3, 5, 3, 9), code="OFL101", name="wait-on-uncaptured-event",
        message="Wait on `ev`, which may have been recorded outside the current capture", fix_safety=FixSafety.UNSAFE,
    )
    _listing([FileFix(path="m.py", original=b"", fixed=b"", remaining=[left], left=[left])], [])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("m.py:3: OFL101 not fixed: no fix of OFL101 applies to this code as written")
    assert left.message not in line


def test_fix_edits_are_labelled_with_the_findings_check_reported(project: Path) -> None:
    """The rewrite of the SGLang offloader also prevents OFL202, which `check` does not report
    there: no edit is labelled with it; each label names the reported finding's place."""
    result = offlint("fix", "offload.py")
    edits = [line for line in result.stderr.splitlines() if "[unsafe]" in line]
    assert edits and not any("OFL202" in line for line in edits)
    assert "OFL103 (149:9), OFL101 (161:9) [unsafe]" in edits[0]
