"""Capture modes are part of a fix's contract (issue 33), on SGLang 0.5.23's released offloader
(tests/data/sglang_release/): with every mode named (the default) `fix` gives the inline rewrite,
which forks nothing while capturing; with `capture-modes = ["whole"]` the primed overlap; a
strategy a named mode defeats is not applied, and the finding says which mode and what to do.
The GPU oracle (tests/test_fix_sglang_release_gpu.py) runs the three files under every mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.fixing.capture_modes import CAPTURE_MODES, parse_modes

RELEASE = Path(__file__).resolve().parent / "data" / "sglang_release"
ORIGINAL = RELEASE / "offloader.py"


def _project(tmp_path: Path, modes: list[str] | None) -> Path:
    lines = ["[tool.offlint]"]
    if modes is not None:
        lines.append("capture-modes = " + json.dumps(modes))
    (tmp_path / "pyproject.toml").write_text("\n".join(lines) + "\n")
    shutil.copy(ORIGINAL, tmp_path / "offloader.py")
    return tmp_path / "offloader.py"


def _fix(path: Path, *options: str) -> dict:
    result = CliRunner().invoke(main, ["fix", "--no-color", "--output-format", "json", *options, str(path)])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["files"][0]


def _codes(path: Path) -> list[str]:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "offlint-json", str(path)])
    assert result.exit_code in (0, 1), result.output
    return sorted(d["code"] for d in json.loads(result.stdout)["diagnostics"])


@pytest.mark.parametrize(
    ("modes", "golden", "strategy"),
    [(None, "fixed_all_modes.py", "inline"), (["whole"], "fixed_whole.py", "overlap")],
    ids=["default-all-modes", "whole"],
)
def test_fix_of_the_release_under_the_named_modes(tmp_path: Path, modes: list[str] | None, golden: str, strategy: str) -> None:
    path = _project(tmp_path, modes)
    assert _codes(path) == ["OFL201", "OFL203", "OFL203"]
    report = _fix(path, "--apply")
    assert report["strategies"] == [strategy]
    assert path.read_bytes() == (RELEASE / golden).read_bytes()
    # the fix's own code is no finding: only the two OFL203 no fix removes are left
    assert _codes(path) == ["OFL203", "OFL203"]
    assert _fix(path)["changed"] is False  # a fixed point
    if modes is None:  # the note says which mode defeated the overlap, and what to do
        (note,) = report["notes"]
        assert "capture mode `piecewise`" in note and "904" in note
        assert 'capture-modes = ["whole"]' in note


def test_a_strategy_a_named_mode_defeats_is_not_fixed_and_says_why(tmp_path: Path) -> None:
    path = _project(tmp_path, ["whole", "segmented-vllm"])
    report = _fix(path, "--strategy", "overlap")
    assert report["changed"] is False
    (left,) = [n for n in report["not_fixed"] if n["code"] == "OFL201"]
    assert "not sound under capture mode `segmented-vllm`" in left["reason"]
    assert "904" in left["reason"] and 'capture-modes = ["whole"]' in left["reason"]
    # the default strategy under the same modes falls back to the inline rewrite, which is sound
    assert _fix(path)["strategies"] == ["inline"]


def test_capture_modes_setting_is_validated(tmp_path: Path) -> None:
    assert parse_modes(["piecewise", "whole"]) == ("whole", "piecewise")
    with pytest.raises(ValueError, match="unknown mode 'pieces'"):
        parse_modes(["pieces"])
    with pytest.raises(ValueError, match="non-empty list"):
        parse_modes([])
    assert set(CAPTURE_MODES) == {"whole", "piecewise", "segmented-sglang", "segmented-vllm"}
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\ncapture-modes = ["whole", "eager"]\n')
    (tmp_path / "m.py").write_text("x = 1\n")
    result = CliRunner().invoke(main, ["check", "--no-cache", str(tmp_path / "m.py")])
    assert result.exit_code == 2
    assert "capture-modes: unknown mode 'eager'" in result.output


def test_each_fix_is_offered_only_under_the_modes_it_is_sound_in() -> None:
    from offlint.fixing.capture_modes import not_sound_reason

    everything = CAPTURE_MODES
    for label in ("offloader-inline", "fork-join", "hook-moves", "OFL204", "OFL106"):
        assert not_sound_reason(label, everything) is None, label  # fork nothing left open
    for label in ("offloader-overlap", "event-handoff", "external-event", "external-event+fork-join"):
        assert not_sound_reason(label, ("whole",)) is None, label
        for mode in ("piecewise", "segmented-sglang", "segmented-vllm"):
            reason = not_sound_reason(label, ("whole", mode))
            assert reason is not None and f"capture mode `{mode}`" in reason, (label, mode)
