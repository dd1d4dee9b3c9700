"""README.md stays true and short: it opens with the two set-up commands, its command and rule
tables match the tool, it stays under 15 KB, and it and the docs pages say nothing dated or about
things outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from offlint.catalogue import load_catalogue
from offlint.cli import main

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
# pages other engineers write are checked by their own tests
OWN_PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md"] + [
    p
    for p in sorted((REPO / "docs").glob("*.md"))
    if p.name not in {"configuration.md", "output-formats.md", "reliability.md", "generality.md"}
]


def test_readme_opens_with_demo_and_test_commands() -> None:
    block = README.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_readme_is_at_most_15_kb() -> None:
    assert len(README.encode("utf-8")) <= 15 * 1024


def test_rule_table_matches_the_catalogue() -> None:
    rows = re.findall(r"^\| (OFL\d{3}) \| ([a-z-]+) \| (safe|unsafe|—) \|", README, re.MULTILINE)
    expected = [
        (code, spec.name, "—" if spec.fix_safety.value == "none" else spec.fix_safety.value)
        for code, spec in load_catalogue().items()
    ]
    assert rows == expected


def test_command_table_names_every_command() -> None:
    table = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `offlint ([a-z-]+)` \|", table, re.MULTILINE)
    assert listed == sorted(main.list_commands(click.Context(main)))


def test_quickstart_commands_parse() -> None:
    block = README.split("## Quickstart", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line.split("#")[0].split() for line in block.strip().splitlines()]
    assert len(lines) == 3
    for words in lines:
        assert words[0] == "offlint"
        command = main.get_command(click.Context(main), words[1])
        assert command is not None, words
        command.make_context(words[1], words[2:])  # raises on an unknown option or a bad value


def test_make_targets_the_readme_names_exist() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z-]+):", makefile, re.MULTILINE))
    named = set(re.findall(r"`make ([a-z-]+)", README))
    assert named and named <= targets


def test_ci_runs_the_readme_test_commands() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test\n" in ci and "make test-slow" in ci


@pytest.mark.parametrize("page", OWN_PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_dated_narrative_or_outside_reference(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    banned = r"this morning|this afternoon|the day before|fresh-eye|\bsession\b|shared/|GROUND-TRUTH|CATALOGUE\.md|\bissue \d+|\btoday\b|\byesterday\b"
    assert not re.findall(banned, text, re.IGNORECASE)


@pytest.mark.parametrize("page", OWN_PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name} links to {target}"


def test_the_site_lists_every_page() -> None:
    yaml = pytest.importorskip("yaml", reason="pyyaml is in the dev extra")
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in pages(value)]
        return []

    docs = REPO / "docs"
    on_disk = {p.relative_to(docs).as_posix() for p in docs.rglob("*.md")}
    assert set(pages(config["nav"])) == on_disk
    assert {f"rules/{code}.md" for code in load_catalogue()} <= on_disk


def test_the_example_is_what_the_tool_prints(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The bug section's `check` output and `fix` hunks are the tool's own, on the fixture."""
    from click.testing import CliRunner

    monkeypatch.chdir(REPO)
    section = README.split("## The bug it prevents", 1)[1].split("\n## ", 1)[0]
    shown = section.split("```text\n$ ", 1)[1].split("```", 1)[0]
    command, expected = shown.split("\n", 1)
    words = command.split()
    assert words[0] == "offlint"
    checked = CliRunner().invoke(main, [*words[1:], "--no-cache"])
    assert checked.exit_code == 1
    assert checked.stdout + checked.stderr.strip() + "\n" == expected
    whole = tmp_path / "offlint.toml"  # an engine that captures whole forwards
    whole.write_text('capture-modes = ["whole"]\n', encoding="utf-8")
    fixed = CliRunner().invoke(
        main, ["fix", "--no-force-exclude", "--config", str(whole), "fixtures/sglang_offloader_original.py"]
    )
    assert fixed.exit_code == 1
    diff = section.split("```diff\n", 1)[1].split("```", 1)[0]
    hunks = ["@@ " + hunk for hunk in diff.split("@@ ")[1:]]
    assert len(hunks) == 2 and all(hunk in fixed.stdout for hunk in hunks)
