"""Enumerate variants deterministically, judge them, aggregate preservation rates."""

from __future__ import annotations

import ast
import random
import zlib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tests.metamorphic.oracle import Verdict, judge, markers
from tests.metamorphic.seeds import Seed
from tests.metamorphic.transforms import TRANSFORMS, Files


@dataclass(frozen=True)
class Variant:
    seed: Seed
    chain: tuple[str, ...]  # the transforms applied, in order
    files: tuple[tuple[str, str], ...]

    @property
    def tree(self) -> Files:
        return dict(self.files)

    @property
    def label(self) -> str:
        return "+".join(self.chain)


def seed_files(seed: Seed) -> Files:
    return {f"{seed.id}.py": seed.text}


def _rng(*parts: object) -> random.Random:
    return random.Random(zlib.crc32(repr(parts).encode()))


def apply_chain(seed: Seed, chain: Sequence[str], salt: int) -> Files | None:
    files: Files | None = seed_files(seed)
    for step, name in enumerate(chain):
        assert files is not None
        files = TRANSFORMS[name](files, _rng(seed.id, name, step, salt))
        if files is None:
            return None
    return files


def variants(seeds: Sequence[Seed], max_variants: int, *, rounds: int = 3, combos: bool = True) -> Iterator[Variant]:
    """Single transforms first (each seed x transform, `rounds` salts picking other targets),
    then chains of two or three, until `max_variants`. The same seeds give the same variants."""
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    count = 0
    names = sorted(TRANSFORMS)

    def fresh(seed: Seed, chain: tuple[str, ...], files: Files | None) -> Variant | None:
        if files is None:
            return None
        key = (seed.id, tuple(sorted(files.items())))
        if key in seen or files == seed_files(seed):
            return None
        seen.add(key)
        return Variant(seed, chain, tuple(sorted(files.items())))

    for salt in range(rounds):
        for seed in seeds:
            for name in names:
                v = fresh(seed, (name,), apply_chain(seed, (name,), salt))
                if v is not None:
                    yield v
                    count += 1
                    if count >= max_variants:
                        return
    if not combos:
        return
    rng = random.Random(24)
    attempts = 0
    while count < max_variants and attempts < max_variants * 20:
        attempts += 1
        seed = rng.choice(list(seeds))
        chain = tuple(rng.sample(names, rng.choice((2, 3))))
        v = fresh(seed, chain, apply_chain(seed, chain, attempts))
        if v is not None:
            yield v
            count += 1


def structural_problems(seed: Seed, variant: Variant) -> list[str]:
    """What would make the harness wrong: a file that does not parse or compile, markers lost
    or duplicated, no change to the program."""
    problems = []
    files = variant.tree
    for name, text in files.items():
        try:
            compile(text, name, "exec", dont_inherit=True)
        except SyntaxError as exc:
            problems.append(f"{name}: {exc}")
    before = sorted(e.code for e in markers(seed_files(seed)))
    after = sorted(e.code for e in markers(files))
    if before != after:
        problems.append(f"markers changed: {before} -> {after}")
    if not problems:
        seed_ast = ast.dump(ast.parse(seed.text))
        if all(ast.dump(ast.parse(t)) == seed_ast for t in files.values() if t.strip()) and len(files) == 1:
            problems.append("the variant's AST equals the seed's")
    return problems


@dataclass
class Result:
    variant: Variant
    verdict: Verdict


@dataclass
class Tally:
    kept: int = 0
    total: int = 0

    def add(self, ok: bool) -> None:
        self.kept += ok
        self.total += 1

    @property
    def rate(self) -> float:
        return self.kept / self.total if self.total else 1.0


@dataclass
class Summary:
    results: list[Result] = field(default_factory=list)
    broken_seeds: list[str] = field(default_factory=list)  # seeds that fail their relation unchanged

    def by(self, key: str) -> dict[tuple[str, str], Tally]:
        table: dict[tuple[str, str], Tally] = defaultdict(Tally)
        for r in self.results:
            transform = r.variant.chain[0] if len(r.variant.chain) == 1 else "(chains of 2-3)"
            rule = r.variant.seed.rule
            if key == "transform":
                table[(transform, "")].add(r.verdict.preserved)
            elif key == "rule":
                table[("", rule)].add(r.verdict.preserved)
            else:
                table[(transform, rule)].add(r.verdict.preserved)
        return table

    @property
    def total(self) -> Tally:
        t = Tally()
        for r in self.results:
            t.add(r.verdict.preserved)
        return t


def usable_seeds(seeds: Sequence[Seed]) -> tuple[list[Seed], list[str]]:
    """Seeds whose unchanged text satisfies the relation (a seed that fails already measures
    the analysis, not its robustness to rewriting: those are listed apart)."""
    good, broken = [], []
    for seed in seeds:
        (good if judge(seed.kind, seed_files(seed)).preserved else broken).append(seed)
    return good, [s.id for s in broken]


def run(seeds: Sequence[Seed], max_variants: int, *, rounds: int = 3, combos: bool = True) -> Summary:
    usable, broken = usable_seeds(seeds)
    summary = Summary(broken_seeds=broken)
    for variant in variants(usable, max_variants, rounds=rounds, combos=combos):
        summary.results.append(Result(variant, judge(variant.seed.kind, variant.tree)))
    return summary
