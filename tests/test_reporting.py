"""The renderers: every output format is a faithful, deterministic view of one RunReport."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

import offlint
from offlint.catalogue import CatalogueError, RuleSpec, load_catalogue
from offlint.diagnostics import (
    Diagnostic,
    ErrorKind,
    FileError,
    FileReport,
    FixSafety,
    Location,
    RunReport,
)
from offlint.reporting import OUTPUT_FORMATS, render, render_statistics, render_summary
from offlint.reporting.github import escape_data, escape_property
from offlint.reporting.sarif import FINGERPRINT_KEY

ANSI = re.compile(r"\x1b\[")

OFFLOAD_SOURCE = """\
import torch


class Offloader:
    def forward(self, x):
        self.event.wait()
        y = x.cpu()
        return y
"""


def make_spec(code: str, name: str, fix_safety: FixSafety, fix_title: str | None) -> RuleSpec:
    return RuleSpec(
        code=code,
        name=name,
        summary=f"Summary of {name}.",
        message="message",
        fix_title=fix_title,
        fix_safety=fix_safety,
        default_enabled=True,
        prevents="cudaErrorStreamCaptureIsolation",
        docs={"what": f"Checks for {name}.", "why": "Because capture breaks."},
        bad=(),
        good=(),
        source=Path(f"rules/{code}.toml"),
    )


CATALOGUE = {
    "OFL101": make_spec("OFL101", "wait-on-uncaptured-event", FixSafety.UNSAFE, "Skip the wait"),
    "OFL102": make_spec("OFL102", "host-copy-in-capture", FixSafety.SAFE, "Keep it on device"),
    "OFL103": make_spec("OFL103", "unguarded-sync", FixSafety.NONE, None),
}


def diagnostic(
    path: str, line: int, column: int, end_column: int, code: str, message: str, source_line: str
) -> Diagnostic:
    spec = CATALOGUE[code]
    return Diagnostic(
        path=path,
        location=Location(line, column, line, end_column),
        code=code,
        name=spec.name,
        message=message,
        fix_title=spec.fix_title,
        fix_safety=spec.fix_safety,
        source_line=source_line,
    )


def offload_diagnostics(path: str, shift: int = 0) -> list[Diagnostic]:
    return [
        diagnostic(
            path, 7 + shift, 13, 20, "OFL102", "`.cpu()` copies to the host", "        y = x.cpu()"
        ),
        diagnostic(
            path, 6 + shift, 9, 26, "OFL101", "Wait on `self.event`", "        self.event.wait()"
        ),
    ]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "offload.py").write_text(OFFLOAD_SOURCE, encoding="utf-8")
    return tmp_path


@pytest.fixture
def report(root: Path) -> RunReport:
    # files listed out of order on purpose: every view must sort by (path, line, column, code)
    gone = FileReport(
        path="pkg/gone.py",
        diagnostics=[diagnostic("pkg/gone.py", 3, 5, 10, "OFL103", "Sync: a, b", "")],
    )
    offload = FileReport(path="pkg/offload.py", diagnostics=offload_diagnostics("pkg/offload.py"))
    broken = FileReport(
        path="pkg/broken.py",
        errors=[FileError("pkg/broken.py", ErrorKind.SYNTAX, "invalid syntax", line=4)],
    )
    return RunReport(
        files=[offload, gone, broken],
        errors=[FileError("missing.py", ErrorKind.MISSING, "no such file or directory")],
    )


def render_all(report: RunReport, root: Path, **options: Any) -> dict[str, str]:
    return {
        fmt: render(report, fmt, root=root, color=False, catalogue=CATALOGUE, **options)
        for fmt in OUTPUT_FORMATS
    }


# --- concise ---------------------------------------------------------------------------------


def test_concise_is_one_exact_line_per_diagnostic_in_order(report: RunReport, root: Path) -> None:
    assert render(report, "concise", root=root, color=False).splitlines() == [
        "pkg/gone.py:3:5: OFL103 Sync: a, b",
        "pkg/offload.py:6:9: OFL101 [*] Wait on `self.event`",
        "pkg/offload.py:7:13: OFL102 [*] `.cpu()` copies to the host",
    ]


def test_concise_without_show_fixes_drops_the_marker(report: RunReport, root: Path) -> None:
    text = render(report, "concise", root=root, color=False, show_fixes=False)
    assert "[*]" not in text
    assert "pkg/offload.py:6:9: OFL101 Wait on `self.event`" in text.splitlines()


# --- full ------------------------------------------------------------------------------------


def test_full_shows_a_code_frame_with_caret_and_help(report: RunReport, root: Path) -> None:
    text = render(report, "full", root=root, color=False)
    assert not ANSI.search(text)
    blocks = text.split("\n\n")
    assert len(blocks) == 3
    wait_block = blocks[1].splitlines()
    assert wait_block[0] == "pkg/offload.py:6:9: OFL101 [*] Wait on `self.event`"
    assert "6 |         self.event.wait()" in wait_block
    caret_line = wait_block[wait_block.index("6 |         self.event.wait()") + 1]
    # the caret starts under column 9 and spans [9, 26)
    assert caret_line == "  |         " + "^" * 17 + " OFL101"
    # two lines of context either side
    assert "4 | class Offloader:" in wait_block
    assert "8 |         return y" in wait_block
    assert wait_block[-1] == "  = help: Skip the wait"


def test_full_without_readable_file_or_kept_line_shows_no_frame(
    report: RunReport, root: Path
) -> None:
    gone_block = render(report, "full", root=root, color=False).split("\n\n")[0]
    assert gone_block.splitlines() == ["pkg/gone.py:3:5: OFL103 Sync: a, b"]


def test_full_falls_back_to_the_kept_source_line(root: Path) -> None:
    kept = diagnostic("pkg/vanished.py", 12, 5, 8, "OFL102", "copy", "    x.cpu()")
    text = render(
        RunReport(files=[FileReport("pkg/vanished.py", [kept])]), "full", root=root, color=False
    )
    assert "12 |     x.cpu()" in text.splitlines()
    assert "   |     ^^^ OFL102" in text.splitlines()


def test_full_uses_given_sources_over_the_disk(report: RunReport, root: Path) -> None:
    sources = {"pkg/offload.py": OFFLOAD_SOURCE.replace("x.cpu()", "x.CPU()")}
    text = render(report, "full", root=root, color=False, sources=sources)
    assert "7 |         y = x.CPU()" in text.splitlines()


def test_full_expands_tabs_so_the_caret_lines_up(root: Path) -> None:
    (root / "tabs.py").write_text("if x:\n\ty = x.cpu()\n", encoding="utf-8")
    found = diagnostic("tabs.py", 2, 6, 13, "OFL102", "copy", "\ty = x.cpu()")
    lines = render(
        RunReport(files=[FileReport("tabs.py", [found])]), "full", root=root, color=False
    )
    frame = lines.splitlines()
    code_line = frame.index("2 |     y = x.cpu()")
    assert frame[code_line + 1] == "  |         ^^^^^^^ OFL102"


def test_full_with_color_emits_ansi_and_same_text(report: RunReport, root: Path) -> None:
    plain = render(report, "full", root=root, color=False)
    colored = render(report, "full", root=root, color=True)
    assert ANSI.search(colored)
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == plain


def test_full_keeps_markup_like_source_text_verbatim(root: Path) -> None:
    (root / "m.py").write_text("x = [bold]y[/bold]\n", encoding="utf-8")
    found = diagnostic("m.py", 1, 5, 12, "OFL103", "[red]not markup[/red]", "")
    text = render(RunReport(files=[FileReport("m.py", [found])]), "full", root=root, color=True)
    assert "[red]not markup[/red]" in text
    assert "[bold]y[/bold]" in text


# --- json ------------------------------------------------------------------------------------


def test_json_fields(report: RunReport, root: Path) -> None:
    document = json.loads(render(report, "offlint-json", root=root, color=False))
    assert document["schema"] == "offlint-json/1"
    assert document["version"] == offlint.__version__
    assert [d["code"] for d in document["diagnostics"]] == ["OFL103", "OFL101", "OFL102"]
    wait = document["diagnostics"][1]
    assert wait == {
        "code": "OFL101",
        "name": "wait-on-uncaptured-event",
        "message": "Wait on `self.event`",
        "filename": "pkg/offload.py",
        "location": {"row": 6, "column": 9},
        "end_location": {"row": 6, "column": 26},
        "fix": {"applicability": "unsafe", "message": "Skip the wait", "edits": []},  # no edits: not confirmed by a fixer
        "note": None,
        "confidence": "high",
        "cell": None,  # a notebook's cell
    }
    assert document["diagnostics"][0]["fix"] is None
    assert document["diagnostics"][2]["fix"]["applicability"] == "safe"
    assert document["errors"] == [
        {
            "filename": "missing.py",
            "kind": "missing-path",
            "message": "no such file or directory",
            "row": None,
            "column": None,
            "cell": None,
        },
        {
            "filename": "pkg/broken.py",
            "kind": "syntax-error",
            "message": "invalid syntax",
            "row": 4,
            "column": None,
            "cell": None,
        },
    ]
    assert document["summary"] == {"diagnostics": 3, "fixable": 2, "errors": 2, "files": 3}


def test_json_of_empty_report(root: Path) -> None:
    document = json.loads(render(RunReport(), "offlint-json", root=root, color=False))
    assert document["diagnostics"] == [] and document["errors"] == []


# --- sarif -----------------------------------------------------------------------------------


def check_sarif_structure(log: dict[str, Any]) -> None:
    """The properties SARIF 2.1.0 requires (sarif-schema-2.1.0.json `required` lists)."""
    assert log["version"] == "2.1.0"
    assert isinstance(log["runs"], list)
    for run in log["runs"]:
        driver = run["tool"]["driver"]
        assert isinstance(driver["name"], str)
        rule_ids = [rule["id"] for rule in driver.get("rules", [])]
        assert len(rule_ids) == len(set(rule_ids))
        for rule in driver.get("rules", []):
            for key in ("shortDescription", "fullDescription"):
                if key in rule:
                    assert isinstance(rule[key]["text"], str)
            if "help" in rule:
                assert isinstance(rule["help"]["text"], str)
            assert rule.get("defaultConfiguration", {}).get("level", "error") in (
                "none",
                "note",
                "warning",
                "error",
            )
        for invocation in run.get("invocations", []):
            assert isinstance(invocation["executionSuccessful"], bool)
            for note in invocation.get("toolExecutionNotifications", []):
                assert isinstance(note["message"]["text"], str)
        for result in run.get("results", []):
            assert isinstance(result["message"]["text"], str)
            assert result["level"] in ("none", "note", "warning", "error")
            for location in result["locations"]:
                physical = location["physicalLocation"]
                uri = physical["artifactLocation"]["uri"]
                assert "\\" not in uri and not uri.startswith("/")
                region = physical["region"]
                assert region["startLine"] >= 1 and region["startColumn"] >= 1
                assert (region["endLine"], region["endColumn"]) >= (
                    region["startLine"],
                    region["startColumn"],
                )


def sarif(report: RunReport, root: Path) -> dict[str, Any]:
    return json.loads(render(report, "sarif", root=root, color=False, catalogue=CATALOGUE))


def test_sarif_document(report: RunReport, root: Path) -> None:
    log = sarif(report, root)
    check_sarif_structure(log)
    assert log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "offlint"
    assert driver["version"] == offlint.__version__
    assert driver["informationUri"].startswith(("https://", "file://"))
    assert [rule["id"] for rule in driver["rules"]] == ["OFL101", "OFL102", "OFL103"]
    first = driver["rules"][0]
    spec = CATALOGUE["OFL101"]
    assert first["name"] == "wait-on-uncaptured-event"
    assert first["shortDescription"]["text"] == spec.summary
    assert first["help"]["text"] == "Documentation: `offlint rule OFL101`."
    assert first["help"]["markdown"].startswith(f"# wait-on-uncaptured-event (OFL101)\n\n{spec.summary}\n")
    assert first["help"]["markdown"].endswith("`offlint rule OFL101`.\n")
    assert first["properties"]["fixSafety"] == "unsafe"
    assert first["properties"]["prevents"] == spec.prevents
    assert first["defaultConfiguration"]["level"] == "error"

    results = run["results"]
    assert [r["ruleId"] for r in results] == ["OFL103", "OFL101", "OFL102"]
    for result in results:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] == "error"
    wait = results[1]
    assert wait["message"]["text"] == "Wait on `self.event`"
    physical = wait["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": "pkg/offload.py", "uriBaseId": "%SRCROOT%"}
    assert physical["region"] == {"startLine": 6, "startColumn": 9, "endLine": 6, "endColumn": 26}

    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    notes = invocation["toolExecutionNotifications"]
    assert [n["descriptor"]["id"] for n in notes] == ["missing-path", "syntax-error"]
    broken = notes[1]["locations"][0]["physicalLocation"]
    assert broken["artifactLocation"]["uri"] == "pkg/broken.py"
    assert broken["region"] == {"startLine": 4}


def test_sarif_uris_are_relative_to_root_even_for_absolute_paths(root: Path) -> None:
    absolute = str(root / "pkg" / "offload.py")
    log = sarif(RunReport(files=[FileReport(absolute, offload_diagnostics(absolute))]), root)
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in log["runs"][0]["results"]
    }
    assert uris == {"pkg/offload.py"}
    check_sarif_structure(log)


def fingerprints_by_code(log: dict[str, Any]) -> dict[str, str]:
    return {
        r["ruleId"]: r["partialFingerprints"][FINGERPRINT_KEY] for r in log["runs"][0]["results"]
    }


def test_sarif_fingerprints_survive_moved_code(root: Path) -> None:
    before = sarif(
        RunReport(files=[FileReport("pkg/offload.py", offload_diagnostics("pkg/offload.py"))]), root
    )
    shifted = [
        Diagnostic(
            path=d.path,
            location=Location(
                d.location.line + 3,
                d.location.column + 4,
                d.location.end_line + 3,
                d.location.end_column + 4,
            ),
            code=d.code,
            name=d.name,
            message=d.message,
            fix_title=d.fix_title,
            fix_safety=d.fix_safety,
            source_line="    " + d.source_line,  # moved down and re-indented
        )
        for d in offload_diagnostics("pkg/offload.py")
    ]
    after = sarif(RunReport(files=[FileReport("pkg/offload.py", shifted)]), root)
    assert fingerprints_by_code(before) == fingerprints_by_code(after)
    assert len(set(fingerprints_by_code(before).values())) == 2


def test_sarif_fingerprints_tell_identical_lines_apart(root: Path) -> None:
    twice = [diagnostic("a.py", line, 1, 8, "OFL102", "copy", "x.cpu()") for line in (3, 9)]
    log = sarif(RunReport(files=[FileReport("a.py", twice)]), root)
    prints = [r["partialFingerprints"][FINGERPRINT_KEY] for r in log["runs"][0]["results"]]
    assert len(set(prints)) == 2
    # the same line in another file, or flagged by another rule, is another finding
    elsewhere = diagnostic("b.py", 3, 1, 8, "OFL102", "copy", "x.cpu()")
    other_rule = diagnostic("a.py", 3, 1, 8, "OFL103", "sync", "x.cpu()")
    for variant in (elsewhere, other_rule):
        moved = sarif(RunReport(files=[FileReport(variant.path, [variant])]), root)
        assert fingerprints_by_code(moved)[variant.code] not in prints


def test_sarif_fingerprint_reads_the_line_when_none_was_kept(root: Path) -> None:
    kept = diagnostic("pkg/offload.py", 7, 13, 20, "OFL102", "copy", "        y = x.cpu()")
    unkept = diagnostic("pkg/offload.py", 7, 13, 20, "OFL102", "copy", "")
    first = sarif(RunReport(files=[FileReport("pkg/offload.py", [kept])]), root)
    second = sarif(RunReport(files=[FileReport("pkg/offload.py", [unkept])]), root)
    assert fingerprints_by_code(first) == fingerprints_by_code(second)


def test_sarif_successful_run_and_unknown_code(root: Path) -> None:
    stray = Diagnostic("a.py", Location(1, 1, 1, 2), "OFL999", "stray-rule", "stray")
    log = sarif(RunReport(files=[FileReport("a.py", [stray])]), root)
    check_sarif_structure(log)
    (run,) = log["runs"]
    assert run["invocations"][0] == {"executionSuccessful": True, "toolExecutionNotifications": []}
    result = run["results"][0]
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "OFL999"


def test_sarif_from_the_shipped_catalogue(report: RunReport, root: Path) -> None:
    try:
        catalogue = load_catalogue()
    except CatalogueError as exc:  # rule files are being written alongside this module
        pytest.skip(f"catalogue not loadable yet: {exc}")
    log = json.loads(render(report, "sarif", root=root, color=False))
    check_sarif_structure(log)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    fired = {d.code for d in report.diagnostics}
    for rule, spec in zip(rules, catalogue.values(), strict=False):
        assert rule["id"] == spec.code
        # the full help once per rule, and only for the rules that fired
        if spec.code in fired:
            assert f"offlint rule {spec.code}" in rule["help"]["markdown"]
            assert "## Why is this bad?" in rule["help"]["markdown"]
        else:
            assert "help" not in rule and rule["helpUri"].endswith(f"/rules/{spec.code}.md")


# --- github ----------------------------------------------------------------------------------


def test_github_escaping() -> None:
    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert escape_property("dir:with,comma%\n") == "dir%3Awith%2Ccomma%25%0A"


def test_github_lines(report: RunReport, root: Path) -> None:
    lines = render(report, "github", root=root, color=False).splitlines()
    assert lines == [
        "::error file=pkg/gone.py,line=3,col=5,endLine=3,endColumn=10,title=OFL103::Sync: a, b",
        "::error file=pkg/offload.py,line=6,col=9,endLine=6,endColumn=26,title=OFL101::Wait on `self.event`",
        "::error file=pkg/offload.py,line=7,col=13,endLine=7,endColumn=20,title=OFL102::`.cpu()` copies to the host",
        "::error file=missing.py,title=offlint missing-path::no such file or directory",
        "::error file=pkg/broken.py,line=4,title=offlint syntax-error::invalid syntax",
    ]


def test_github_escapes_paths_and_multiline_messages(root: Path) -> None:
    odd = diagnostic("we,ird:name.py", 1, 1, 2, "OFL103", "50%\nof it", "")
    (line,) = render(
        RunReport(files=[FileReport(odd.path, [odd])]), "github", root=root, color=False
    ).splitlines()
    assert (
        line
        == "::error file=we%2Cird%3Aname.py,line=1,col=1,endLine=1,endColumn=2,title=OFL103::50%25%0Aof it"
    )


# --- every format ----------------------------------------------------------------------------


def test_every_format_is_deterministic_and_order_independent(report: RunReport, root: Path) -> None:
    first = render_all(report, root)
    reversed_report = RunReport(files=list(reversed(report.files)), errors=list(report.errors))
    assert render_all(reversed_report, root) == first
    assert set(first) == set(OUTPUT_FORMATS)


def test_no_format_colours_when_color_is_false(report: RunReport, root: Path) -> None:
    for fmt, text in render_all(report, root).items():
        assert not ANSI.search(text), fmt


def test_machine_formats_ignore_color(report: RunReport, root: Path) -> None:
    for fmt in ("concise", "json", "sarif", "github"):
        plain = render(report, fmt, root=root, color=False, catalogue=CATALOGUE)
        assert render(report, fmt, root=root, color=True, catalogue=CATALOGUE) == plain


def test_unknown_format(report: RunReport, root: Path) -> None:
    with pytest.raises(ValueError, match="unknown output format"):
        render(report, "xml", root=root, color=False)


def test_empty_report_renders_nothing_for_line_formats(root: Path) -> None:
    for fmt in ("full", "concise", "github"):
        assert render(RunReport(), fmt, root=root, color=False) == ""


# --- statistics and summary ------------------------------------------------------------------


def test_statistics_table_and_json(report: RunReport) -> None:
    extra = FileReport("z.py", [diagnostic("z.py", 1, 1, 2, "OFL102", "copy", "x.cpu()")])
    bigger = RunReport(files=[*report.files, extra])
    assert render_statistics(bigger).splitlines() == [
        "2\tOFL102\t[*] host-copy-in-capture",
        "1\tOFL101\t[*] wait-on-uncaptured-event",
        "1\tOFL103\t[ ] unguarded-sync",
    ]
    document = json.loads(render_statistics(bigger, "json"))
    assert document["statistics"][0] == {
        "code": "OFL102",
        "name": "host-copy-in-capture",
        "count": 2,
        "fixable": True,
    }
    assert render_statistics(RunReport()) == ""


def test_summary_counts_and_run_errors(report: RunReport, root: Path) -> None:
    assert render_summary(report, root=root).splitlines() == [
        "missing.py: missing-path: no such file or directory",
        "pkg/broken.py:4: syntax-error: invalid syntax",
        "Found 3 errors (1 fixable with `offlint check --fix`, 1 more with an unsafe fix: `offlint check --fix --unsafe-fixes`).",
        "2 files could not be checked.",
    ]


def test_summary_clean_and_singular(root: Path) -> None:
    # a run that checked no file never says "All checks passed!"
    assert render_summary(RunReport()) == "No files were checked.\n"
    assert render_summary(RunReport(files=[FileReport("a.py")])) == "All checks passed!\n"
    one = FileReport("a.py", [diagnostic("a.py", 1, 1, 2, "OFL103", "sync", "")])
    assert render_summary(RunReport(files=[one])) == "Found 1 error.\n"
    unchecked = RunReport(errors=[FileError("a.py", ErrorKind.UNREADABLE, "denied")])
    assert "All checks passed!" not in render_summary(unchecked)


def test_the_reachability_note_is_a_view_of_the_model(root: Path) -> None:
    """A diagnostic's note (why the code is capture-reachable) is shown by the views that have a
    place for it: full (`= note:`), json (`note`), sarif (`properties.note`); the one-line views
    (concise, github) stay one line."""
    note = "capture-reachable: method of offloader-style class Offloader: it keeps a CUDA stream or event in self.stream"
    wait = dataclasses.replace(offload_diagnostics("pkg/offload.py")[1], note=note)
    report = RunReport(files=[FileReport(path="pkg/offload.py", diagnostics=[wait])])
    views = render_all(report, root)
    assert views["full"].splitlines()[-2:] == ["  = help: Skip the wait", f"  = note: {note}"]
    assert json.loads(views["offlint-json"])["diagnostics"][0]["note"] == note
    (result,) = json.loads(views["sarif"])["runs"][0]["results"]
    assert result["properties"]["note"] == note
    assert note not in views["concise"] and note not in views["github"]
    assert len(views["concise"].splitlines()) == 1 and len(views["github"].splitlines()) == 1
