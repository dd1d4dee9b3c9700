"""Seeds: the catalogue's examples and the linter fixtures, each with its expected findings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from offlint.catalogue import load_catalogue

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


@dataclass(frozen=True)
class Seed:
    id: str
    rule: str  # the catalogue rule the example belongs to, or "fixture"
    kind: str  # "bad": markers must survive; "good": must stay clean
    text: str

    @property
    def module(self) -> str:
        """A module name for the seed's file (examples' ids hold hyphens)."""
        return re.sub(r"\W", "_", self.id.lower())


def catalogue_seeds() -> list[Seed]:
    seeds = []
    for spec in load_catalogue().values():
        for example in (*spec.bad, *spec.good):
            # examples with [tool.offlint] overrides would need them in every variant's folder
            if not example.config:
                seeds.append(Seed(example.id, spec.code, example.kind, example.code))
    return seeds


def fixture_seeds() -> list[Seed]:
    seeds = []
    for path in sorted(FIXTURES.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        kind = "bad" if re.search(r"#\s*expect:\s*OFL\d{3}", text) else "good"
        seeds.append(Seed(f"fixture-{path.stem}", "fixture", kind, text))
    return seeds


def all_seeds() -> list[Seed]:
    return catalogue_seeds() + fixture_seeds()
