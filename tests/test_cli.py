"""`offlint check / rule / rules` end to end: click's runner in process, and real subprocesses.

The project fixture holds three real hazards (the first bad examples of rules/OFL105.toml and
rules/OFL101.toml, and an OFL204 record_stream no-op) and a clean file; every assertion names the
codes, lines and fields it expects. Fixability is end to end: OFL101 has a fixer, but not for this
snippet (it rewrites only the prefetch/wait offloader shape), so it is never marked fixable; the
OFL204 finding is one `offlint fix` really removes, so it is the one fixable diagnostic.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import offlint
from offlint.catalogue import load_catalogue
from offlint.cli import main
from tests.sources import HOST_SYNC

REPO = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;]*m")

EVENT = textwrap.dedent(
    """\
    import torch
    from torch.cuda import Event, current_stream


    class Prefetcher(torch.nn.Module):
        def __init__(self):
            self.copy_stream = torch.cuda.Stream()
            self.ready = Event()

        def forward(self, x):
            current_stream().wait_event(self.ready)
            return self.buffers
    """
)
# the safe OFL204 fix applies: `offlint fix` hoists the consumer stream out of the block
RECORD = textwrap.dedent(
    """\
    import torch


    def prefetch(host, side):
        with torch.cuda.stream(side):
            device = host.to("cuda", non_blocking=True)
            device.record_stream(torch.cuda.current_stream())
        torch.cuda.current_stream().wait_stream(side)
        return device
    """
)
CLEAN = textwrap.dedent(
    """\
    import torch


    def load_weights(model):
        for p in model.parameters():
            p.data = p.data.cuda()
        torch.cuda.synchronize()
        return model
    """
)
# a half-edited offloader: it has what makes a file worth parsing, and does not parse (libcst stops at line 17)
BROKEN = HOST_SYNC + "\n\ndef other(x:\n    return x.item()\n"

MSG_SYNC = "`torch.cuda.synchronize()` synchronises with the host in capture-reachable code (cudaErrorStreamCaptureUnsupported)"
MSG_ITEM = "`.item()` synchronises with the host in capture-reachable code (cudaErrorStreamCaptureUnsupported)"
MSG_WAIT = "Wait on `self.ready`, which may have been recorded outside the current capture (cudaErrorStreamCaptureIsolation)"
FIX_WAIT = (
    "Skip the wait while capturing when the data is ready, or re-issue the copy inside the capture"
)
MSG_RECORD = (
    "`device.record_stream(...)` records the current stream inside `with torch.cuda.stream(side)`,"
    " i.e. the allocating stream itself: a no-op"
)
FIX_RECORD = "Take the consumer stream before entering the side-stream block and record that"
# what `fix` writes for it, carried by the finding: three lines inserted before line 5 (the
# `with`), line 7 replaced
EDITS_RECORD = [
    {
        "content": "    # Taken before entering the side-stream block: inside it, current_stream() is the side\n"
        "    # stream itself, and recording a tensor on its allocating stream does nothing.\n"
        "    consumer_stream = torch.cuda.current_stream()\n",
        "location": {"row": 5, "column": 1},
        "end_location": {"row": 5, "column": 1},
    },
    {
        "content": "        device.record_stream(consumer_stream)\n",
        "location": {"row": 7, "column": 1},
        "end_location": {"row": 8, "column": 1},
    },
]

CONCISE = [
    f"pkg/host_sync.py:5:5: OFL105 {MSG_SYNC}",
    f"pkg/host_sync.py:6:9: OFL105 {MSG_ITEM}",
    f"pkg/offloader.py:11:9: OFL101 {MSG_WAIT} [medium]",
    f"pkg/prefetch.py:7:9: OFL204 [*] {MSG_RECORD}",
]
SUMMARY = "Found 4 errors (1 fixable with `offlint check --fix`).\n"


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write(tmp_path / "pyproject.toml", '[project]\nname = "demo"\n\n[tool.offlint]\n')
    write(tmp_path / "pkg" / "host_sync.py", HOST_SYNC)
    write(tmp_path / "pkg" / "offloader.py", EVENT)
    write(tmp_path / "pkg" / "prefetch.py", RECORD)
    write(tmp_path / "pkg" / "clean.py", CLEAN)
    write(tmp_path / "README.txt", "not python\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str, input: str | bytes | None = None) -> Result:
    result = CliRunner().invoke(main, list(args), input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def concise(*args: str, input: str | bytes | None = None) -> tuple[int, list[str], str]:
    result = invoke("check", "--output-format", "concise", *args, input=input)
    return result.exit_code, result.stdout.splitlines(), result.stderr


def codes_at(lines: list[str]) -> list[tuple[str, int, str]]:
    rows = []
    for line in lines:
        where, rest = line.split(": ", 1)
        path, row, _ = where.rsplit(":", 2)
        rows.append((path, int(row), rest.split(" ", 1)[0]))
    return rows


def run_offlint(
    *args: str, cwd: Path, input: str | bytes | None = None
) -> subprocess.CompletedProcess[str]:
    data = input.decode() if isinstance(input, bytes) else input
    return subprocess.run(
        [sys.executable, "-m", "offlint", *args],
        cwd=cwd,
        input=data,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )


# ================================================================ output formats


def test_full_format_is_the_default(project: Path) -> None:
    result = invoke("check")
    assert result.exit_code == 1
    out = result.stdout
    assert not ANSI.search(out)  # not a terminal: no colour
    assert out.count("\n\n") == 3  # four diagnostics, separated by blank lines
    first, second, third, fourth = out.rstrip("\n").split("\n\n")
    assert first.splitlines() == [
        f"pkg/host_sync.py:5:5: OFL105 {MSG_SYNC}",
        "  |",
        "3 |",
        "4 | def step(x):",
        "5 |     torch.cuda.synchronize()",
        "  |     ^^^^^^^^^^^^^^^^^^^^^^^^ OFL105",
        "6 |     n = x.sum().item()",
        "7 |     return x * n",
        "  |",
        # why `step` counts: the note every capture-reachability rule carries
        "  = note: capture-reachable: called inside a CUDA graph capture region",
    ]
    assert second.splitlines()[0] == f"pkg/host_sync.py:6:9: OFL105 {MSG_ITEM}"
    assert "  |         ^^^^^^^^^^^^^^ OFL105" in second.splitlines()
    assert "help:" not in first + second  # OFL105 has no fix
    # OFL101 has a fixer, but `offlint fix` cannot fix this snippet: no [*]; the rule's advice
    # is still shown as help, to be followed by hand
    assert third.splitlines() == [
        f"pkg/offloader.py:11:9: OFL101 {MSG_WAIT}",
        "   |",
        " 9 |",
        "10 |     def forward(self, x):",
        "11 |         current_stream().wait_event(self.ready)",
        "   |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ OFL101",
        "12 |         return self.buffers",
        "   |",
        f"   = help: {FIX_WAIT}",
        "   = note: capture-reachable: forward path of offloader-style class Prefetcher: it keeps a"
        " CUDA stream or event in self.copy_stream",
        "   = confidence: medium",  # the capture that calls this forward is outside the tree
    ]
    assert fourth.splitlines() == [
        f"pkg/prefetch.py:7:9: OFL204 [*] {MSG_RECORD}",
        "  |",
        "5 |     with torch.cuda.stream(side):",
        '6 |         device = host.to("cuda", non_blocking=True)',
        "7 |         device.record_stream(torch.cuda.current_stream())",
        "  |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ OFL204",
        "8 |     torch.cuda.current_stream().wait_stream(side)",
        "9 |     return device",
        "  |",
        f"  = help: {FIX_RECORD}",
    ]
    assert result.stderr == SUMMARY
    assert "Found" not in out


def test_full_format_colour_is_forced_by_flag(project: Path) -> None:
    coloured = invoke("check", "--color").stdout
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured) == invoke("check", "--no-color").stdout
    # machine formats are never coloured
    assert not ANSI.search(invoke("check", "--color", "--output-format", "offlint-json").stdout)


def test_concise_format(project: Path) -> None:
    code, lines, err = concise()
    assert (code, lines, err) == (1, CONCISE, SUMMARY)


def test_json_format_field_by_field(project: Path) -> None:
    result = invoke("check", "--output-format", "offlint-json")
    assert result.exit_code == 1
    assert result.stderr == SUMMARY
    document = json.loads(result.stdout)
    assert sorted(document) == ["diagnostics", "errors", "schema", "summary", "version"]
    assert document["schema"] == "offlint-json/1"
    assert document["version"] == offlint.__version__
    assert document["diagnostics"] == [
        {
            "code": "OFL105",
            "name": "host-sync-in-capture",
            "message": MSG_SYNC,
            "filename": "pkg/host_sync.py",
            "location": {"row": 5, "column": 5},
            "end_location": {"row": 5, "column": 29},
            "fix": None,
            "note": "capture-reachable: called inside a CUDA graph capture region",
            "confidence": "high",
            "cell": None,
        },
        {
            "code": "OFL105",
            "name": "host-sync-in-capture",
            "message": MSG_ITEM,
            "filename": "pkg/host_sync.py",
            "location": {"row": 6, "column": 9},
            "end_location": {"row": 6, "column": 23},
            "fix": None,
            "note": "capture-reachable: called inside a CUDA graph capture region",
            "confidence": "high",
            "cell": None,
        },
        {
            "code": "OFL101",
            "name": "wait-on-uncaptured-event",
            "message": MSG_WAIT,
            "filename": "pkg/offloader.py",
            "location": {"row": 11, "column": 9},
            "end_location": {"row": 11, "column": 48},
            "fix": None,  # the rule has a fixer, but it cannot fix this snippet
            "note": "capture-reachable: forward path of offloader-style class Prefetcher: it keeps a CUDA"
            " stream or event in self.copy_stream",
            "confidence": "medium",
            "cell": None,
        },
        {
            "code": "OFL204",
            "name": "record-stream-on-allocating-stream",
            "message": MSG_RECORD,
            "filename": "pkg/prefetch.py",
            "location": {"row": 7, "column": 9},
            "end_location": {"row": 7, "column": 58},
            "fix": {"applicability": "safe", "message": FIX_RECORD, "edits": EDITS_RECORD},
            "note": None,  # OFL204 does not depend on capture-reachability
            "confidence": "high",
            "cell": None,
        },
    ]
    assert document["errors"] == []
    assert document["summary"] == {"diagnostics": 4, "fixable": 1, "errors": 0, "files": 4}
    # byte-for-byte deterministic
    assert invoke("check", "--output-format", "offlint-json").stdout == result.stdout


def test_json_format_when_clean(project: Path) -> None:
    result = invoke("check", "pkg/clean.py", "--output-format", "offlint-json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["diagnostics"] == [] and document["errors"] == []
    assert document["summary"] == {"diagnostics": 0, "fixable": 0, "errors": 0, "files": 1}
    assert result.stderr == "All checks passed!\n"


def test_sarif_format_field_by_field(project: Path) -> None:
    result = invoke("check", "--output-format", "sarif")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["version"] == "2.1.0"
    assert document["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    (run,) = document["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "offlint"
    assert driver["version"] == driver["semanticVersion"] == offlint.__version__
    catalogue = load_catalogue()
    assert [rule["id"] for rule in driver["rules"]] == sorted(catalogue)
    by_id = {rule["id"]: rule for rule in driver["rules"]}
    assert by_id["OFL101"]["name"] == "wait-on-uncaptured-event"
    assert by_id["OFL101"]["shortDescription"]["text"] == catalogue["OFL101"].summary
    assert by_id["OFL101"]["properties"]["fixSafety"] == "unsafe"
    assert by_id["OFL105"]["properties"]["fixSafety"] == "none"
    assert by_id["OFL204"]["properties"]["fixSafety"] == "safe"
    from offlint.reporting.sarif import help_markdown

    assert by_id["OFL105"]["help"]["markdown"] == help_markdown(catalogue["OFL105"])  # it fired
    fired = {result["ruleId"] for result in run["results"]}
    for code, rule in by_id.items():  # the others: their page is one reference away
        assert ("help" in rule) == (code in fired) and rule["helpUri"].endswith(f"/rules/{code}.md")
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]

    graph = {"note": "capture-reachable: called inside a CUDA graph capture region", "confidence": "high"}
    prefetcher = {
        "note": "capture-reachable: forward path of offloader-style class Prefetcher: it keeps a CUDA"
        " stream or event in self.copy_stream",
        "confidence": "medium",
    }
    expected = [
        ("OFL105", MSG_SYNC, "pkg/host_sync.py", (5, 5, 5, 29), False, "none", graph),
        ("OFL105", MSG_ITEM, "pkg/host_sync.py", (6, 9, 6, 23), False, "none", graph),
        # the rule has an (unsafe) fixer, but `offlint fix` cannot fix this snippet
        ("OFL101", MSG_WAIT, "pkg/offloader.py", (11, 9, 11, 48), False, "none", prefetcher),
        ("OFL204", MSG_RECORD, "pkg/prefetch.py", (7, 9, 7, 58), True, "safe", {"confidence": "high"}),
    ]
    assert len(run["results"]) == len(expected)
    fingerprints = set()
    for result_object, (code, message, uri, region, fixable, safety, note) in zip(
        run["results"], expected, strict=True
    ):
        assert result_object["ruleId"] == code
        assert driver["rules"][result_object["ruleIndex"]]["id"] == code
        # the confidence is the level: what capture surely reaches is an error, the rest warnings
        assert result_object["level"] == ("warning" if note.get("confidence") == "medium" else "error")
        assert result_object["rank"] == (60.0 if note.get("confidence") == "medium" else 90.0)
        assert result_object["message"] == {"text": message}
        (location,) = result_object["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"] == {"uri": uri, "uriBaseId": "%SRCROOT%"}
        assert physical["region"] == dict(
            zip(["startLine", "startColumn", "endLine", "endColumn"], region, strict=True)
        )
        fingerprint = result_object["partialFingerprints"]["offlintFingerprint/v1"]
        assert re.fullmatch(r"[0-9a-f]{32}", fingerprint)
        fingerprints.add(fingerprint)
        assert result_object["properties"] == {"fixable": fixable, "fixSafety": safety, **note}
    assert len(fingerprints) == 4


def test_sarif_reports_files_that_could_not_be_checked(project: Path) -> None:
    write(project / "pkg" / "broken.py", BROKEN)
    result = invoke("check", "--output-format", "sarif")
    assert result.exit_code == 2
    (run,) = json.loads(result.stdout)["runs"]
    assert [r["ruleId"] for r in run["results"]] == ["OFL105", "OFL105", "OFL101", "OFL204"]
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert notification["descriptor"] == {"id": "syntax-error"}
    physical = notification["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": "pkg/broken.py", "uriBaseId": "%SRCROOT%"}
    assert notification["message"]["text"]


def test_github_format(project: Path) -> None:
    result = invoke("check", "--output-format", "github")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"::error file=pkg/host_sync.py,line=5,col=5,endLine=5,endColumn=29,title=OFL105::{MSG_SYNC}",
        f"::error file=pkg/host_sync.py,line=6,col=9,endLine=6,endColumn=23,title=OFL105::{MSG_ITEM}",
        # medium confidence: a warning annotation
        f"::warning file=pkg/offloader.py,line=11,col=9,endLine=11,endColumn=48,title=OFL101::{MSG_WAIT}",
        f"::error file=pkg/prefetch.py,line=7,col=9,endLine=7,endColumn=58,title=OFL204::{MSG_RECORD}",
    ]
    assert result.stderr == SUMMARY


def test_github_format_annotates_files_that_could_not_be_checked(project: Path) -> None:
    write(project / "pkg" / "latin1.py", b"import torch\nname = '\xe9t\xe9'\n")
    result = invoke("check", "pkg/latin1.py", "--output-format", "github")
    assert result.exit_code == 2
    (line,) = result.stdout.splitlines()
    assert line.startswith("::error file=pkg/latin1.py,title=offlint undecodable::")


def test_statistics_text(project: Path) -> None:
    result = invoke("check", "--statistics")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "2\tOFL105\t[ ] host-sync-in-capture",
        "1\tOFL101\t[ ] wait-on-uncaptured-event",  # has a fixer, but not for this snippet
        "1\tOFL204\t[*] record-stream-on-allocating-stream",
    ]
    assert result.stderr == SUMMARY


def test_statistics_json(project: Path) -> None:
    result = invoke("check", "--statistics", "--output-format", "offlint-json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "schema": "offlint-json/1",
        "statistics": [
            {"code": "OFL105", "name": "host-sync-in-capture", "count": 2, "fixable": False},
            {"code": "OFL101", "name": "wait-on-uncaptured-event", "count": 1, "fixable": False},
            {
                "code": "OFL204",
                "name": "record-stream-on-allocating-stream",
                "count": 1,
                "fixable": True,
            },
        ],
    }


def test_fix_apply_exit_codes(project: Path, tmp_path: Path) -> None:
    """After --apply: 1 while hazards remain (--exit-zero: 0); --exit-non-zero-on-fix: 1 when
    something was fixed even if nothing remains; 0 when everything was fixed."""
    clean = tmp_path / "only_record"
    clean.mkdir()
    (clean / "prefetch.py").write_text(RECORD, encoding="utf-8")
    assert invoke("fix", "--apply", "--exit-non-zero-on-fix", str(clean)).exit_code == 1
    assert invoke("fix", "--apply", "--exit-non-zero-on-fix", str(clean)).exit_code == 0  # nothing left to fix
    (clean / "prefetch.py").write_text(RECORD, encoding="utf-8")
    assert invoke("fix", "--apply", str(clean)).exit_code == 0  # fixed, nothing left
    assert invoke("fix", "--apply", "--exit-zero", "pkg").exit_code == 0  # OFL101/OFL105 stay


def test_fixable_means_offlint_fix_removes_it(project: Path) -> None:
    # `[*]` is a promise: after `offlint fix --apply` exactly the unmarked diagnostics remain,
    # and since some do, the run fails as `ruff check --fix` would (the CI line)
    applied = invoke("fix", "--apply", "pkg")
    assert applied.exit_code == 1
    assert "3 hazard(s) left after fixing" in applied.stderr
    assert "consumer_stream = torch.cuda.current_stream()" in (
        project / "pkg" / "prefetch.py"
    ).read_text(encoding="utf-8")
    code, lines, err = concise()
    assert (code, lines, err) == (
        1,
        [line for line in CONCISE if "[*]" not in line],
        "Found 3 errors.\n",
    )
    document = json.loads(invoke("check", "--output-format", "offlint-json").stdout)
    assert document["summary"] == {"diagnostics": 3, "fixable": 0, "errors": 0, "files": 4}
    assert invoke("check", "--statistics").stdout.splitlines() == [
        "2\tOFL105\t[ ] host-sync-in-capture",
        "1\tOFL101\t[ ] wait-on-uncaptured-event",
    ]


def test_timings_say_where_the_time_went(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--timings` goes to stderr (the report on stdout is untouched): the file counts by how each
    was settled, then the run's stages, then per-file stages summed over files."""
    from offlint.analysis import cache

    monkeypatch.setattr(cache, "RACY_SECONDS", 0)  # the files were written just now
    cold = invoke("check", "--output-format", "concise", "--timings")
    assert cold.exit_code == 1
    assert cold.stdout == invoke("check", "--output-format", "concise", "--no-cache").stdout
    head, *stages = cold.stderr.split("timings: ", 1)[1].splitlines()
    # host_sync, offloader and prefetch hold hazards and are parsed; clean.py has no capture API
    assert head == "4 files: 0 from cache (0 not even read), 1 settled by the prefilter, 3 parsed"
    names = [line.split()[0] for line in stages if line.startswith("    ")]
    assert {"discovery", "cache", "read", "prefilter", "analyse", "total", "parse"} <= set(names)
    assert "  per file (summed over files and workers)" in stages
    warm = invoke("check", "--output-format", "concise", "--timings")
    assert warm.stdout == cold.stdout
    head = warm.stderr.split("timings: ", 1)[1].splitlines()[0]
    assert head == "4 files: 4 from cache (4 not even read), 0 settled by the prefilter, 0 parsed"
    assert "read " not in warm.stderr.split("timings: ", 1)[1]  # nothing was read


def test_statistics_when_clean_prints_nothing(project: Path) -> None:
    result = invoke("check", "pkg/clean.py", "--statistics")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "All checks passed!\n")


@pytest.mark.parametrize("output_format", ["full", "concise", "json", "sarif", "github"])
def test_output_file_gets_the_report_and_stdout_stays_empty(
    project: Path, output_format: str
) -> None:
    result = invoke("check", "--output-format", output_format, "-o", "report.out")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == SUMMARY
    written = (project / "report.out").read_text(encoding="utf-8")
    assert written == invoke("check", "--output-format", output_format, "--no-color").stdout
    assert not ANSI.search(written)
    if output_format in ("json", "sarif"):
        json.loads(written)


def test_output_file_that_cannot_be_written_is_exit_2(project: Path) -> None:
    result = invoke("check", "-o", "no/such/dir/report.json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("offlint: error: cannot write no/such/dir/report.json: ")


def test_version() -> None:
    for flag in ("--version", "-V"):
        result = invoke(flag)
        assert result.exit_code == 0
        # offlint's own version first, then what decides its behaviour (tests/test_cli_polish.py)
        assert result.stdout.startswith(f"offlint {offlint.__version__}\nlibcst ")


# ================================================================ exit codes


def test_exit_0_when_clean(project: Path) -> None:
    result = invoke("check", "pkg/clean.py")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "All checks passed!\n")


def test_exit_1_on_findings_and_exit_zero(project: Path) -> None:
    assert invoke("check").exit_code == 1
    result = invoke("check", "--exit-zero", "--output-format", "concise")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == CONCISE  # the report is unchanged


def test_exit_zero_does_not_hide_files_that_could_not_be_checked(project: Path) -> None:
    write(project / "pkg" / "broken.py", BROKEN)
    assert invoke("check", "--exit-zero").exit_code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--bogus"], "No such option '--bogus'"),
        (["check", "--output-format", "xml"], "Invalid value for '--output-format'"),
        (["check", "--jobs", "0"], "Invalid value for '-j' / '--jobs'"),
        (["chek"], "unknown command 'chek' (did you mean `offlint check`?)"),
        (["rules", "--output-format", "yaml"], "Invalid value for '--output-format'"),
    ],
)
def test_exit_2_on_usage_errors(project: Path, args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "Usage:" in result.stderr
    assert message in result.stderr


def test_exit_2_on_bad_config(project: Path) -> None:
    write(project / "pyproject.toml", "[tool.offlint]\nselect = ['OFL101']\nper-file-ignore = {}\n")
    result = invoke("check")
    assert (result.exit_code, result.stdout) == (2, "")
    assert (
        result.stderr
        == f"offlint: error: {project.resolve() / 'pyproject.toml'}:3: unknown key [tool.offlint] per-file-ignore"
        " (did you mean `per-file-ignores`?)\n"
    )


def test_exit_2_on_missing_path_and_the_rest_is_still_checked(project: Path) -> None:
    code, lines, err = concise("nope.py", "pkg")
    assert code == 2
    assert lines == CONCISE
    assert (
        err
        == "nope.py: missing-path: no such file or directory\n"
        + SUMMARY
        + "1 file could not be checked.\n"
    )


def test_exit_2_on_a_missing_path_alone(project: Path) -> None:
    result = invoke("check", "missing_dir")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        "missing_dir: missing-path: no such file or directory\n"
        "No errors found in the files that could be checked.\n"
        "1 file could not be checked.\n"
    )


def test_syntax_error_next_to_a_good_file(project: Path) -> None:
    write(project / "pkg" / "broken.py", BROKEN)
    code, lines, err = concise()
    assert code == 2
    assert lines == CONCISE  # the good files are still reported
    first, *rest = err.splitlines()
    assert re.fullmatch(r"pkg/broken\.py:16:\d+: syntax-error: .+", first)
    assert rest == [SUMMARY.strip(), "1 file could not be checked."]
    document = json.loads(invoke("check", "--output-format", "offlint-json").stdout)
    (error,) = document["errors"]
    assert error["filename"] == "pkg/broken.py"
    assert error["kind"] == "syntax-error"
    assert error["row"] == 16  # where CPython places it: the unclosed bracket
    assert error["message"]
    assert document["summary"]["errors"] == 1 and document["summary"]["diagnostics"] == 4


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"import torch\nname = '\xe9t\xe9'\ntorch.cuda.synchronize()\n", "undecodable"),
        (b"# -*- coding: utf-8 -*-\nx = '\xff\xfe'\n", "undecodable"),
        (b"# -*- coding: no-such-codec -*-\nx = 1\n", "undecodable"),
        (b"import torch\x00\n", "undecodable"),
    ],
)
def test_non_utf8_file_next_to_a_good_file(project: Path, data: bytes, reason: str) -> None:
    write(project / "pkg" / "bad_bytes.py", data)
    code, lines, err = concise()
    assert code == 2
    assert lines == CONCISE
    assert err.startswith(f"pkg/bad_bytes.py: {reason}: ")
    (error,) = json.loads(invoke("check", "--output-format", "offlint-json").stdout)["errors"]
    assert (error["filename"], error["kind"], error["row"]) == ("pkg/bad_bytes.py", reason, None)


def test_latin1_file_with_a_coding_cookie_is_fine(project: Path) -> None:
    write(
        project / "pkg" / "latin1.py", "# -*- coding: latin-1 -*-\nname = 'été'\n".encode("latin-1")
    )
    code, lines, _ = concise()
    assert (code, lines) == (1, CONCISE)


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_unreadable_file_chmod_000(project: Path) -> None:
    locked = write(project / "pkg" / "locked.py", HOST_SYNC)
    locked.chmod(0)
    try:
        try:
            locked.read_bytes()
        except PermissionError:
            pass
        else:
            pytest.skip("running as root (or with CAP_DAC_OVERRIDE): chmod 000 does not stop reads")
        code, lines, err = concise()
        assert code == 2
        assert lines == CONCISE
        assert err.startswith("pkg/locked.py: unreadable: Permission denied\n")
    finally:
        locked.chmod(0o644)


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
def test_unreadable_file_next_to_a_good_file(project: Path) -> None:
    # unreadable for any user, root included: reading /proc/self/mem from offset 0 fails (EIO)
    code, lines, err = concise("--no-cache", "/proc/self/mem", "pkg")
    assert code == 2
    assert lines == CONCISE
    assert (
        err
        == "/proc/self/mem: unreadable: Input/output error\n"
        + SUMMARY
        + "1 file could not be checked.\n"
    )
    (error,) = json.loads(
        invoke("check", "--no-cache", "/proc/self/mem", "--output-format", "offlint-json").stdout
    )["errors"]
    assert error == {
        "filename": "/proc/self/mem",
        "kind": "unreadable",
        "message": "Input/output error",
        "row": None,
        "column": None,
        "cell": None,
    }


# ================================================================ stdin


def test_stdin_without_a_filename(project: Path) -> None:
    code, lines, err = concise("-", input=HOST_SYNC)
    assert code == 1
    assert lines == [f"-:5:5: OFL105 {MSG_SYNC}", f"-:6:9: OFL105 {MSG_ITEM}"]
    assert err == "Found 2 errors.\n"


def test_stdin_with_a_filename(project: Path) -> None:
    code, lines, err = concise("-", "--stdin-filename", "pkg/edited.py", input=EVENT)
    assert (code, lines, err) == (1, [f"pkg/edited.py:11:9: OFL101 {MSG_WAIT} [medium]"], "Found 1 error.\n")
    # fixability is confirmed on the piped text too
    code, lines, err = concise("-", "--stdin-filename", "pkg/edited.py", input=RECORD)
    assert (code, lines) == (1, [f"pkg/edited.py:7:9: OFL204 [*] {MSG_RECORD}"])
    assert err == "Found 1 error (1 fixable with `offlint check --fix`).\n"


def test_stdin_filename_alone_reads_stdin(project: Path) -> None:
    code, lines, _ = concise("--stdin-filename", "pkg/edited.py", input=RECORD)
    assert (code, lines) == (1, [f"pkg/edited.py:7:9: OFL204 [*] {MSG_RECORD}"])


def test_stdin_clean_and_undecodable(project: Path) -> None:
    assert concise("-", input=CLEAN) == (0, [], "All checks passed!\n")
    code, lines, err = concise("-", "--stdin-filename", "x.py", input=b"import torch\nx = '\xff'\n")
    assert (code, lines) == (2, [])
    assert err.startswith("x.py: undecodable: ")


def test_stdin_code_frame_shows_what_was_piped_not_the_file_on_disk(project: Path) -> None:
    # an editor sends unsaved text: the frame must show it, not pkg/offloader.py as saved
    edited = EVENT.replace("return self.buffers", "return self._unsaved_edit")
    result = invoke("check", "-", "--stdin-filename", "pkg/offloader.py", input=edited)
    assert result.exit_code == 1
    assert "12 |         return self._unsaved_edit" in result.stdout.splitlines()
    result = invoke("check", "-", input=HOST_SYNC)
    assert "4 | def step(x):" in result.stdout.splitlines()  # context lines, not the bare line


def test_stdin_filename_drives_config_discovery(project: Path) -> None:
    write(project / "sub" / "pyproject.toml", '[tool.offlint]\nignore = ["OFL105"]\n')
    write(project / "pyproject.toml", '[tool.offlint.per-file-ignores]\n"tests/*" = ["OFL1"]\n')
    assert concise("-", "--stdin-filename", "sub/x.py", input=HOST_SYNC) == (
        0,
        [],
        "All checks passed!\n",
    )
    assert concise("-", "--stdin-filename", "tests/x.py", input=HOST_SYNC)[:2] == (0, [])
    code, lines, _ = concise("-", "--stdin-filename", "pkg/x.py", input=HOST_SYNC)
    assert (code, codes_at(lines)) == (1, [("pkg/x.py", 5, "OFL105"), ("pkg/x.py", 6, "OFL105")])
    # an absolute filename finds the same config, and is shown relative to the working directory
    code, lines, _ = concise(
        "-", "--stdin-filename", str(project / "sub" / "x.py"), input=HOST_SYNC
    )
    assert (code, lines) == (0, [])
    # --config wins over discovery
    write(project / "strict.toml", 'select = ["ALL"]\n')
    code, lines, _ = concise(
        "-", "--stdin-filename", "sub/x.py", "--config", "strict.toml", input=HOST_SYNC
    )
    assert (code, codes_at(lines)) == (1, [("sub/x.py", 5, "OFL105"), ("sub/x.py", 6, "OFL105")])


def test_stdin_cannot_be_combined_with_paths(project: Path) -> None:
    result = invoke("check", "-", "pkg", input=HOST_SYNC)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "offlint: error: `-` (stdin) cannot be combined with other paths\n"


# ================================================================ selection


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--select", "OFL101"], ["OFL101"]),
        (["--select", "ofl105"], ["OFL105", "OFL105"]),
        (["--select", "OFL1"], ["OFL105", "OFL105", "OFL101"]),
        (["--select", "OFL10"], ["OFL105", "OFL105", "OFL101"]),
        (["--select", "ALL"], ["OFL105", "OFL105", "OFL101", "OFL204"]),
        (["--select", "OFL101,OFL105"], ["OFL105", "OFL105", "OFL101"]),
        (["--select", "OFL101", "--select", "OFL105"], ["OFL105", "OFL105", "OFL101"]),
        (["--select", "OFL101", "--extend-select", "OFL105"], ["OFL105", "OFL105", "OFL101"]),
        (["--select", "ALL", "--ignore", "OFL105"], ["OFL101", "OFL204"]),
        (["--select", "OFL204"], ["OFL204"]),
        (["--ignore", "OFL101"], ["OFL105", "OFL105", "OFL204"]),
        (["--ignore", "OFL1"], ["OFL204"]),
        (["--ignore", "OFL1,OFL204"], []),
        (["--ignore", "all"], []),
        (["--select", "OFL101", "--ignore", "OFL101"], []),
    ],
)
def test_select_ignore_extend_select(project: Path, args: list[str], expected: list[str]) -> None:
    code, lines, _ = concise(*args)
    assert [c for _, _, c in codes_at(lines)] == expected
    assert code == (1 if expected else 0)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--select", "XYZ", "--select: 'XYZ' matches no rule (see `offlint rules`)"),
        ("--select", "OFL8", "--select: 'OFL8' matches no rule (see `offlint rules`)"),
        ("--ignore", "OFL1O1", "--ignore: 'OFL1O1' matches no rule (see `offlint rules`)"),
        (
            "--extend-select",
            "E501",
            "--extend-select: 'E501' matches no rule (see `offlint rules`)",
        ),
    ],
)
def test_unknown_selector_is_an_error(project: Path, option: str, value: str, message: str) -> None:
    for target in ("pkg", "empty"):  # also when there is no file to check at all
        (project / "empty").mkdir(exist_ok=True)
        result = invoke("check", target, option, value)
        assert (result.exit_code, result.stdout) == (2, "")
        assert result.stderr == f"offlint: error: {message}\n"


# ================================================================ suppressions through the CLI


def test_suppression_comments_through_the_cli(project: Path) -> None:
    write(
        project / "pkg" / "host_sync.py",
        HOST_SYNC.replace(
            "torch.cuda.synchronize()", "torch.cuda.synchronize()  # noqa: OFL105"
        ).replace("    n = x.sum().item()", "    # offlint: ignore[OFL1]\n    n = x.sum().item()"),
    )
    write(project / "pkg" / "offloader.py", EVENT + "# offlint: file-ignore[OFL101]\n")
    write(
        project / "pkg" / "prefetch.py",
        RECORD.replace(
            "torch.cuda.current_stream())", "torch.cuda.current_stream())  # noqa: OFL204"
        ),
    )
    assert concise() == (0, [], "All checks passed!\n")
    write(
        project / "pkg" / "offloader.py",
        EVENT.replace("(ready)", "(ready)  # offlint: ignore[OFL105]"),
    )
    code, lines, _ = concise()
    assert (code, codes_at(lines)) == (1, [("pkg/offloader.py", 11, "OFL101")])


# ================================================================ rule / rules


def test_rule_by_code_and_by_name() -> None:
    by_code = invoke("rule", "OFL101")
    assert by_code.exit_code == 0
    assert by_code.stdout == load_catalogue()["OFL101"].markdown()
    assert by_code.stdout.startswith("# wait-on-uncaptured-event (OFL101)\n")
    for heading in ("## What it does", "## Why is this bad?"):
        assert heading in by_code.stdout
    assert "self._load_event.wait()" in by_code.stdout
    assert invoke("rule", "wait-on-uncaptured-event").stdout == by_code.stdout
    assert invoke("rule", "ofl101").stdout == by_code.stdout
    assert invoke("rule", "OFL105").stdout.startswith("# host-sync-in-capture (OFL105)\n")


@pytest.mark.parametrize("name", ["OFL999", "no-such-rule", "OFL1"])
def test_unknown_rule(name: str) -> None:
    result = invoke("rule", name)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith(f"offlint: error: unknown rule {name!r} (see `offlint rules`")


def test_rules_text() -> None:
    result = invoke("rules")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    catalogue = load_catalogue()
    assert [line.split()[0] for line in lines] == list(catalogue)
    assert all(line == line.rstrip() for line in lines)
    rows = {line.split()[0]: line for line in lines}
    assert rows["OFL101"].split(None, 2) == ["OFL101", "wait-on-uncaptured-event", "fix (unsafe)"]
    assert rows["OFL105"].split() == ["OFL105", "host-sync-in-capture", "-"]
    for code, spec in catalogue.items():
        assert spec.name in rows[code]
        assert ("[off by default]" in rows[code]) == (not spec.default_enabled)


def test_rules_json() -> None:
    result = invoke("rules", "--output-format", "json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    catalogue = load_catalogue()
    assert [row["code"] for row in rows] == list(catalogue)
    for row in rows:
        spec = catalogue[row["code"]]
        assert row == {
            "code": spec.code,
            "name": spec.name,
            "summary": spec.summary,
            "fix": spec.fix_safety.value,
            "default": spec.default_enabled,
            "prevents": spec.prevents,
        }
    by_code = {row["code"]: row for row in rows}
    assert (by_code["OFL101"]["fix"], by_code["OFL105"]["fix"]) == ("unsafe", "none")


def test_help_lists_every_command() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for name in ("check", "fix", "probe", "rule", "rules"):
        assert re.search(rf"^\s+{name}\s", result.stdout, re.MULTILINE), name


# ================================================================ real subprocesses


def test_subprocess_json_report_and_summary(project: Path) -> None:
    done = run_offlint("check", "--output-format", "offlint-json", cwd=project)
    assert done.returncode == 1
    document = json.loads(done.stdout)  # stdout holds the report and nothing else
    assert [(d["filename"], d["location"]["row"], d["code"]) for d in document["diagnostics"]] == [
        ("pkg/host_sync.py", 5, "OFL105"),
        ("pkg/host_sync.py", 6, "OFL105"),
        ("pkg/offloader.py", 11, "OFL101"),
        ("pkg/prefetch.py", 7, "OFL204"),
    ]
    assert [d["fix"] for d in document["diagnostics"]] == [
        None,
        None,
        None,
        {"applicability": "safe", "message": FIX_RECORD, "edits": EDITS_RECORD},
    ]
    assert done.stderr == SUMMARY


def test_subprocess_exit_codes(project: Path) -> None:
    assert run_offlint("check", "pkg/clean.py", cwd=project).returncode == 0
    assert run_offlint("check", "pkg", cwd=project).returncode == 1
    assert run_offlint("check", "pkg", "--exit-zero", cwd=project).returncode == 0
    write(project / "pkg" / "broken.py", BROKEN)
    done = run_offlint("check", "pkg", "--output-format", "concise", cwd=project)
    assert done.returncode == 2
    assert done.stdout.splitlines() == CONCISE
    assert "pkg/broken.py:" in done.stderr and "syntax-error" in done.stderr
    done = run_offlint("check", "--frobnicate", cwd=project)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_subprocess_stdin(project: Path) -> None:
    done = run_offlint(
        "check",
        "-",
        "--stdin-filename",
        "pkg/new.py",
        "--output-format",
        "concise",
        cwd=project,
        input=HOST_SYNC,
    )
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"pkg/new.py:5:5: OFL105 {MSG_SYNC}",
        f"pkg/new.py:6:9: OFL105 {MSG_ITEM}",
    ]
    assert done.stderr == "Found 2 errors.\n"


def test_subprocess_sarif_to_file(project: Path) -> None:
    done = run_offlint("check", "--output-format", "sarif", "-o", "out.sarif", cwd=project)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", SUMMARY)
    document = json.loads((project / "out.sarif").read_text(encoding="utf-8"))
    results = document["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["OFL105", "OFL105", "OFL101", "OFL204"]
    assert [r["properties"]["fixable"] for r in results] == [False, False, False, True]


def _imported_modules(*args: str) -> set[str]:
    probe = (
        "import sys\n"
        f"sys.argv = ['offlint', *{list(args)!r}]\n"
        "from offlint.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "print('\\n'.join('MODULE ' + name for name in sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    return {line[7:] for line in done.stdout.splitlines() if line.startswith("MODULE ")}


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"], ["rules"], ["rule", "OFL101"]])
def test_help_and_docs_do_not_import_libcst_or_torch(args: list[str]) -> None:
    modules = _imported_modules(*args)
    assert "offlint.cli" in modules
    assert not {m for m in modules if m.split(".")[0] in ("libcst", "torch")}


def test_help_importtime_shows_no_libcst() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "offlint", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0
    assert "offlint.cli" in done.stderr  # the import log is there
    assert "libcst" not in done.stderr and "torch" not in done.stderr


def test_probe_help_does_not_import_libcst() -> None:
    if not (REPO / "offlint" / "probing" / "command.py").exists():
        pytest.skip("offlint/probing/command.py is not written yet")
    modules = _imported_modules("probe", "--help")
    assert "offlint.probing.command" in modules
    assert not {m for m in modules if m.split(".")[0] in ("libcst", "torch")}


def test_missing_subcommand_module_is_a_clean_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from offlint import cli

    monkeypatch.setitem(cli._LAZY_COMMANDS, "fix", ("offlint.no_such_module", "fix_command"))
    result = invoke("fix", "--help")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith("offlint: error: `offlint fix` is not available: ")


def test_offlint_checks_its_own_source_clean() -> None:
    done = run_offlint("check", "--no-cache", "--output-format", "concise", cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr == "All checks passed!\n"
    # and the package itself, named explicitly (tests/ and fixtures/ are excluded by config)
    done = run_offlint("check", "--no-cache", "offlint", cwd=REPO)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
