"""README.md stays true: its rule table matches the catalogue, and it opens with the two commands."""

from __future__ import annotations

import re
from pathlib import Path

from offlint.catalogue import load_catalogue

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_readme_opens_with_demo_and_test_commands() -> None:
    block = README.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_rule_table_matches_the_catalogue() -> None:
    rows = re.findall(r"^\| (OFL\d{3}) \| ([a-z-]+) \| (safe|unsafe|—) \|", README, re.MULTILINE)
    expected = [
        (code, spec.name, "—" if spec.fix_safety.value == "none" else spec.fix_safety.value)
        for code, spec in load_catalogue().items()
    ]
    assert rows == expected


def test_ci_runs_the_readme_test_command() -> None:
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci
