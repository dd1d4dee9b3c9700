"""pipeline/editor.py: `check` on unsaved buffers (what `offlint server` runs), without the
protocol: the overlay is checked in place of the file, and leaves the cache true to the disk."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from offlint.pipeline import editor

REPO = Path(__file__).resolve().parent.parent
HAZARD = """\
import torch


def prefetch(host: torch.Tensor, side: torch.cuda.Stream):
    with torch.cuda.stream(side):
        consumer = torch.cuda.current_stream()
        dev = host.to("cuda", non_blocking=True)
        dev.record_stream(consumer)
    return dev
"""


def _cli(workspace: Path, cache: Path) -> str:
    env = {**os.environ, "OFFLINT_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-m", "offlint", "check", "--output-format", "concise", "."],
        capture_output=True, text=True, cwd=workspace, env=env, check=False,
    )
    return done.stdout + done.stderr  # the report, then the summary ("All checks passed!")


def test_an_overlay_is_checked_as_if_saved_and_the_disk_stays_the_truth(tmp_path: Path, monkeypatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text("[tool.offlint]\n", encoding="utf-8")
    path = workspace / "prefetch.py"
    path.write_text("import torch\n", encoding="utf-8")
    cache = tmp_path / "cache"
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(cache))
    real = os.path.realpath(path)

    clean = editor.check_project(str(workspace), {})
    assert clean.reports[real].diagnostics == []
    found = editor.check_project(str(workspace), {real: HAZARD.encode()})
    assert [(d.code, d.location.line) for d in found.reports[real].diagnostics] == [("OFL204", 8)]
    assert found.reports[real].diagnostics[0].fix is None  # its rule has a fix, but not for this shape
    assert real in found.settings
    # the overlay never reached the cache's stat index: the file on disk is still clean
    assert "All checks passed!" in _cli(workspace, cache)
    assert editor.check_project(str(workspace), {}).reports[real].diagnostics == []
    # and saved, the CLI says what the editor said
    path.write_text(HAZARD, encoding="utf-8")
    assert "prefetch.py:8:9: OFL204" in _cli(workspace, cache)


def test_an_excluded_file_is_no_report_and_no_buffer_setting(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "gen").mkdir(parents=True)
    (workspace / "pyproject.toml").write_text('[tool.offlint]\nexclude = ["gen/**"]\n', encoding="utf-8")
    path = workspace / "gen" / "out.py"
    path.write_text(HAZARD, encoding="utf-8")
    settings = editor.BufferSettings(workspace)
    assert settings.excluded(path)
    assert not settings.excluded(workspace / "kept.py")
    found = editor.check_project(str(workspace), {os.path.realpath(path): HAZARD.encode()}, use_cache=False)
    assert os.path.realpath(path) not in found.reports


def test_suppression_and_fix_all_text() -> None:
    text = HAZARD
    suppressed = editor.suppressed_text(text, {8: {"OFL204"}})
    assert suppressed is not None
    assert "dev.record_stream(consumer)  # offlint: ignore[OFL204]" in suppressed
    assert editor.suppressed_text(suppressed, {8: {"OFL204"}}) is None  # already there
    assert editor.fixed_text("import torch\n", "x.py", REPO / "x.py", REPO) is None  # nothing to fix


def test_notebook_bytes_are_what_check_reads() -> None:
    from offlint.config import Config, SelectionOverrides
    from offlint.pipeline.check import settings_for

    data = editor.notebook_bytes([(False, "# title"), (True, "import torch"), (True, HAZARD)])
    settings = settings_for(Config(root=REPO), SelectionOverrides(), None)
    report = editor.check_buffer(data.decode(), "nb.ipynb", settings)
    assert [(d.code, d.cell, d.location.line) for d in report.diagnostics] == [("OFL204", 3, 8)]


def test_line_edits_turn_one_text_into_the_other() -> None:
    import pytest

    pytest.importorskip("pygls", reason="the server extra (pygls) is not installed")
    from pygls.workspace.position_codec import PositionCodec

    from offlint.server.convert import edits_between

    def apply(text: str, edits) -> str:  # type: ignore[no-untyped-def]
        lines = text.splitlines(keepends=True)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line))

        def offset(position) -> int:  # type: ignore[no-untyped-def]
            return len(text) if position.line >= len(lines) else starts[position.line] + position.character

        for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
            text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
        return text

    codec = PositionCodec()
    cases = [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb\nc", "a\nb\nc  # offlint: ignore[OFL105]"),  # the last line has no line break
        ("a\nb\n", "x\na\nb\ny\n"),
        ("", "a\n"),
        ("a\n", ""),
    ]
    for old, new in cases:
        assert apply(old, edits_between(codec, old, new)) == new, (old, new)


def test_the_chain_finds_each_definition_it_names() -> None:
    import pytest

    pytest.importorskip("pygls", reason="the server extra (pygls) is not installed")
    from offlint.server.convert import chain_links, definition_line

    source = (
        "import torch\n\nclass A:\n    x = 1\n\n    def f(self):\n        def inner():\n            pass\n\n"
        "    async def g(self):\n        pass\n\ndef f():\n    pass\n\nclass B:\n    def f(self):\n        pass\n"
    )
    expected = {"A": 3, "A.f": 6, "A.f.<locals>.inner": 7, "A.g": 10, "f": 13, "B.f": 17, "B.g": None}
    assert {name: definition_line(source, name) for name in expected} == expected
    assert chain_links("capture-reachable: called from A.f ← pkg.run.step (inside a CUDA graph capture region)") == [
        ("called from A.f", "A.f"),
        ("← pkg.run.step (inside a CUDA graph capture region)", "pkg.run.step"),
    ]
