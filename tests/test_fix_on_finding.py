"""A fix lives on the finding it fixes (ruff's contract): `check` attaches to each diagnostic the
edits `fix` makes for it, a diagnostic is fixable ([*]) exactly when it carries them, and the JSON
and SARIF outputs hand them to editors and code-scanning UIs."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.catalogue import load_catalogue
from offlint.cli import main
from offlint.fixing.apply import FIXABLE_RULES, FixSettings
from offlint.fixing.loop import fix_source

# these tests fix for an engine that captures whole forwards (`capture-modes = ["whole"]`):
# the rewrites the split capture modes defeat are offered only there (fixing/capture_modes.py)
WHOLE = ("whole",)


ROOT = Path(__file__).resolve().parent.parent
SELECT = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)
# offloaders whose findings `fix` removes in one pass of one fixer per finding
FIXED_IN_ONE_PASS = [
    "fixtures/sglang_offloader_original.py",
    "fixtures/sglang_offloader_inline.py",
    "fixtures/block_hook_offloader.py",
    "fixtures/group_offload_record_stream.py",
    "fixtures/golden/record_stream/in.py",
    "fixtures/golden/module_offloader_no_owner/in.py",
]


def _check_json(*args: str) -> dict:  # type: ignore[type-arg]
    result = CliRunner().invoke(
        main, ["check", "--no-cache", "--no-force-exclude", "--output-format", "offlint-json", *args]
    )
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _apply(text: str, edits: list[dict]) -> str:  # type: ignore[type-arg]
    """Whole-line edits, applied bottom-up (they never overlap)."""
    lines = text.splitlines(keepends=True)
    for edit in sorted(edits, key=lambda e: e["location"]["row"], reverse=True):
        assert edit["location"]["column"] == edit["end_location"]["column"] == 1
        first, last = edit["location"]["row"] - 1, edit["end_location"]["row"] - 1
        lines[first:last] = [edit["content"]] if edit["content"] else []
    return "".join(lines)


@pytest.mark.parametrize("relative", FIXED_IN_ONE_PASS)
def test_the_edits_a_finding_carries_are_what_fix_writes(relative: str) -> None:
    path = ROOT / relative
    report = _check_json("--config", 'capture-modes = ["whole"]', str(path))
    fixable = [d for d in report["diagnostics"] if d["fix"] is not None]
    assert fixable, "the fixture has fixable findings"
    text = path.read_text(encoding="utf-8")
    fixed = fix_source(path.read_bytes(), relative, FixSettings(select=SELECT, capture_modes=WHOLE)).fixed.decode("utf-8")
    assert fixed != text
    edit_sets = {json.dumps(d["fix"]["edits"], sort_keys=True) for d in fixable}
    results = {_apply(text, json.loads(edits)) for edits in edit_sets}
    assert results == {fixed}  # the one rewrite, carried by each finding it fixes
    ast.parse(fixed)
    for d in fixable:
        assert d["fix"]["edits"] and d["fix"]["applicability"] in ("safe", "unsafe")
        assert d["fix"]["message"]


def test_a_finding_no_fixer_plans_for_carries_no_fix(tmp_path: Path) -> None:
    case = tmp_path / "runner.py"
    case.write_text(
        textwrap.dedent(
            """\
            import torch


            class Runner:
                def __init__(self, ev):
                    self.graph = torch.cuda.CUDAGraph()
                    self.ev = ev

                def capture(self, x):
                    with torch.cuda.graph(self.graph):
                        torch.cuda.current_stream().wait_event(self.ev)
                        y = x * 2
                    return y
            """
        ),
        encoding="utf-8",
    )
    report = _check_json(str(case))
    assert [(d["code"], d["fix"]) for d in report["diagnostics"]] == [("OFL101", None)]
    assert report["summary"]["fixable"] == 0
    concise = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", str(case)])
    assert "OFL101" in concise.stdout and "[*]" not in concise.stdout


def test_sarif_results_carry_the_fix_as_replacements(tmp_path: Path) -> None:
    path = ROOT / "fixtures" / "golden" / "record_stream" / "in.py"
    as_json = _check_json(str(path))
    result = CliRunner().invoke(
        main, ["check", "--no-cache", "--no-force-exclude", "--output-format", "sarif", str(path)]
    )
    sarif = json.loads(result.stdout)
    (found,) = sarif["runs"][0]["results"]
    (fix,) = found["fixes"]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"] == found["locations"][0]["physicalLocation"]["artifactLocation"]
    (diagnostic,) = as_json["diagnostics"]
    expected = [
        (e["location"]["row"], e["end_location"]["row"], e["content"]) for e in diagnostic["fix"]["edits"]
    ]
    got = [
        (r["deletedRegion"]["startLine"], r["deletedRegion"]["endLine"], r.get("insertedContent", {}).get("text", ""))
        for r in change["replacements"]
    ]
    assert got == expected


def test_the_fixes_check_attaches_follow_the_compile_safe_setting(tmp_path: Path) -> None:
    source = (ROOT / "fixtures" / "sglang_offloader_original.py").read_text(encoding="utf-8")
    contents = {}
    for setting in ("false", "true"):
        project = tmp_path / setting
        project.mkdir()
        (project / "pyproject.toml").write_text(
            f'[tool.offlint]\ncapture-modes = ["whole"]\n[tool.offlint.fix]\ncompile-safe = {setting}\n', encoding="utf-8"
        )
        (project / "offloader.py").write_text(source, encoding="utf-8")
        report = _check_json("--config", str(project / "pyproject.toml"), str(project / "offloader.py"))
        edits = [e for d in report["diagnostics"] if d["fix"] for e in d["fix"]["edits"]]
        assert edits
        contents[setting] = "".join(e["content"] for e in edits)
    assert "is_current_stream_capturing" in contents["false"]
    assert "is_current_stream_capturing" not in contents["true"]
