"""OFL901 unused-suppression (ruff's RUF100 for offlint's codes): what counts as used, what is
never judged, and that it is a rule like the others (catalogue, docs, selection, both parsers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.analysis.engine import FileSettings, check_source
from offlint.analysis.rules import all_rules
from offlint.catalogue import default_selection, load_catalogue
from offlint.cli import main

OFFLOADER = """\
import torch


class Offloader:
    def __init__(self):
        self.alt_stream = torch.cuda.Stream()

    def forward(self, x):
        self.alt_stream.synchronize(){sync}
        y = x * 2{plain}
        return y
"""


def findings(source: str, *, front_end: str = "skeleton", select: frozenset[str] | None = None) -> list[tuple[int, str, str]]:
    settings = FileSettings(select=select or frozenset(load_catalogue()), front_end=front_end)
    report = check_source(source.encode(), "x.py", settings)
    assert not report.errors, report.errors
    return [(d.location.line, d.code, d.message) for d in report.diagnostics]


def test_it_is_a_catalogued_rule_off_by_default() -> None:
    spec = load_catalogue()["OFL901"]
    assert (spec.name, spec.default_enabled) == ("unused-suppression", False)
    assert default_selection()["OFL901"] is False
    assert "OFL901" in all_rules()
    result = CliRunner().invoke(main, ["rule", "OFL901"])
    assert result.exit_code == 0 and result.stdout.startswith("# unused-suppression (OFL901)")
    listed = CliRunner().invoke(main, ["rules"]).stdout.splitlines()
    assert any(line.startswith("OFL901  unused-suppression") and "[off by default]" in line for line in listed)


@pytest.mark.parametrize("front_end", ["skeleton", "libcst"])
def test_a_used_suppression_is_not_reported(front_end: str) -> None:
    source = OFFLOADER.format(sync="  # offlint: ignore[OFL105]", plain="")
    settings = FileSettings(select=frozenset(load_catalogue()), front_end=front_end)
    report = check_source(source.encode(), "x.py", settings)
    assert (report.diagnostics, report.suppressed) == ([], 1)


@pytest.mark.parametrize("front_end", ["skeleton", "libcst"])
def test_an_unused_suppression_is_reported_on_its_line(front_end: str) -> None:
    source = OFFLOADER.format(sync="  # offlint: ignore[OFL105]", plain="  # noqa: OFL105, E501")
    assert findings(source, front_end=front_end) == [
        (10, "OFL901", "Unused suppression `# noqa: OFL105, E501`: no OFL105 finding on this line")
    ]


def test_partly_used_directives_name_only_the_unused_codes() -> None:
    source = OFFLOADER.format(sync="  # offlint: ignore[OFL105, OFL204]", plain="")
    assert findings(source) == [
        (9, "OFL901", "Unused suppression `# offlint: ignore[OFL105, OFL204]`: no OFL204 finding on this line")
    ]


def test_use_is_judged_against_every_rule_and_confidence() -> None:
    # the suppressed finding is low confidence (hidden by default) and its rule not selected:
    # the comment still has a purpose
    source = OFFLOADER.replace("def forward", "def helper").format(sync="  # offlint: ignore[OFL105]", plain="")
    assert findings(source, select=frozenset({"OFL901"})) == []
    stale = source.replace("OFL105", "OFL106")
    assert [code for _, code, _ in findings(stale, select=frozenset({"OFL901"}))] == ["OFL901"]


def test_foreign_and_blanket_directives_are_never_judged() -> None:
    source = OFFLOADER.format(sync="  # offlint: ignore[OFL105]", plain="  # noqa: E501")
    assert findings(source) == []
    for blanket in ("  # noqa", "  # offlint: ignore", "  # offlint: ignore[]"):
        assert findings(OFFLOADER.format(sync="  # noqa", plain=blanket)) == []


def test_own_line_and_file_directives() -> None:
    source = (
        "# offlint: file-ignore[OFL2]\nimport torch\n\n\nclass Offloader:\n    def __init__(self):\n"
        "        self.alt_stream = torch.cuda.Stream()\n\n    def forward(self, x):\n"
        "        # offlint: ignore[OFL105]\n        self.alt_stream.synchronize()\n"
        "        # offlint: ignore[OFL105]\n        return x\n"
    )
    assert findings(source) == [
        (2, "OFL901", "Unused suppression `# offlint: file-ignore[OFL2]` (line 1): no OFL2 finding in this file"),
        (13, "OFL901", "Unused suppression `# offlint: ignore[OFL105]` (line 12): no OFL105 finding in the statement it covers"),
    ]


def test_a_code_that_names_no_rule_is_reported() -> None:
    source = OFFLOADER.format(sync="  # noqa: OFL105, OFL999", plain="")
    assert findings(source) == [
        (9, "OFL901", "Unused suppression `# noqa: OFL105, OFL999`: no OFL999 (no such rule) finding on this line")
    ]


def test_naming_ofl901_suppresses_the_report_itself() -> None:
    source = OFFLOADER.format(sync="", plain="  # offlint: ignore[OFL105, OFL901]")
    assert [(line, code) for line, code, _ in findings(source)] == [(9, "OFL105")]


def test_cli_extend_select_and_cross_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "off.py").write_text(OFFLOADER.format(sync="", plain="  # noqa: OFL105"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    plain = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise"])
    assert (plain.exit_code, plain.stdout) == (0, "")  # off by default
    strict = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", "--extend-select", "OFL901"])
    assert strict.exit_code == 1
    assert strict.stdout == "off.py:10:9: OFL901 Unused suppression `# noqa: OFL105`: no OFL105 finding on this line\n"


TRICKY = '''\
import torch


class Off:
    def __init__(self):
        self.s = torch.cuda.Stream()

    def _offload(self, i: int) -> None:  # noqa: OFL999
        for p in self.blocks[i].parameters():  # noqa: OFL105
            p.data = self.cpu_params[p]
        # offlint: ignore[OFL105]
        for block in self.blocks:
            x = (a + b)  # noqa: OFL101

    @property  # noqa: OFL204
    def f(self):  # noqa: OFL204
        shape = lambda _bs, mt: (
            mt,  # noqa: OFL1
            *x,
        )
        total = sum(
            # offlint: ignore[OFL105]
            y + 1 in z
            for y in range(3)
        )
        message = (
            "a\\n"
            # offlint: ignore[OFL105]
            f"b={sorted(z)}"  # noqa: OFL101
        )
        self.q = torch.full(
            (self.n,), 0, dtype=torch.int64  # offlint: ignore[OFL1]
        )  # noqa: OFL204
        return (
            1
        )  # noqa: OFL999
'''


def test_reports_sit_where_both_parsers_put_them() -> None:
    """Definitions, decorators, parentheses of one parser's range but not the other's,
    generator arguments, implicitly concatenated and formatted strings: a report is placed on a
    node both parsers locate alike (found by mutating real offloader code with directives)."""
    skeleton = findings(TRICKY, select=frozenset({"OFL901"}))
    reference = findings(TRICKY, front_end="libcst", select=frozenset({"OFL901"}))
    assert skeleton == reference
    lines = [line for line, _, _ in skeleton]
    # a line no node starts on (a closing bracket, a string) reports on the statement holding it
    assert lines == [8, 9, 12, 13, 15, 16, 18, 23, 26, 31, 32, 34]
