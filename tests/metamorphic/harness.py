"""Enumerate variants deterministically, judge them, aggregate preservation rates."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import random
import re
import zlib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from offlint.catalogue import EXPECT_MARKER
from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE, Confidence
from tests.metamorphic.oracle import PACKAGE, Verdict, judge, markers
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
    names = sorted(TRANSFORMS)

    def fresh(seed: Seed, chain: tuple[str, ...], files: Files | None) -> Variant | None:
        if files is None:
            return None
        key = (seed.id, tuple(sorted(files.items())))
        if key in seen or files == seed_files(seed):
            return None
        seen.add(key)
        return Variant(seed, chain, tuple(sorted(files.items())))

    def singles(salt: int) -> Iterator[Variant]:
        for seed in seeds:
            for name in names:
                v = fresh(seed, (name,), apply_chain(seed, (name,), salt))
                if v is not None:
                    yield v

    def chains() -> Iterator[Variant]:
        rng = random.Random(24)
        for attempt in range(len(seeds) * 40):
            seed = rng.choice(list(seeds))
            chain = tuple(rng.sample(names, rng.choice((2, 3))))
            v = fresh(seed, chain, apply_chain(seed, chain, attempt))
            if v is not None:
                yield v

    # every seed x transform once, then chains of 2-3 (a thousand at most), then other targets
    stages: list[Iterator[Variant]] = [singles(0)]
    if combos:
        stages.append(itertools.islice(chains(), 1000))
    stages.extend(singles(salt) for salt in range(1, rounds))
    yield from itertools.islice(itertools.chain.from_iterable(stages), max_variants)


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
    # a rewrite may add imports of the standard library it uses, and of the tree's own modules
    added = set().union(*(_imported(t) for t in files.values())) - _imported(seed.text) - {PACKAGE, "functools", "dataclasses"}
    if added:
        problems.append(f"imports a module the seed does not: {sorted(added)}")
    if not problems:
        seed_ast = ast.dump(ast.parse(seed.text))
        if all(ast.dump(ast.parse(t)) == seed_ast for t in files.values() if t.strip()) and len(files) == 1:
            problems.append("the variant's AST equals the seed's")
    return problems


def _imported(text: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


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
    broken_seeds: list[str] = field(default_factory=list)  # seeds left out (see at_floor)
    below_floor: list[str] = field(default_factory=list)  # markers the unchanged seed misses at the floor
    seeds: int = 0

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


def at_floor(seed: Seed, floor: Confidence = DEFAULT_MIN_CONFIDENCE) -> tuple[Seed | None, list[str]]:
    """The seed as the relation reads it at the default floor: a marked finding the unchanged
    seed does not show there (a low-confidence one) is not expected of its variants either
    (its marker becomes `# below floor: OFLnnn`); a bad seed with no marker left, or a good
    seed with a finding, is left out. Returns the seed and the markers taken off."""
    verdict = judge(seed.kind, seed_files(seed), floor)
    if seed.kind == "good":
        return (seed if verdict.preserved else None), []
    lines = seed.text.split("\n")
    dropped = []
    for exp in verdict.lost:
        line = lines[exp.line - 1]
        match = EXPECT_MARKER.search(line)
        assert match is not None
        codes = [c for c in re.findall(r"OFL\d{3}", match.group(1)) if c != exp.code]
        marker = f"# expect: {', '.join(codes)}  " if codes else ""
        lines[exp.line - 1] = line[: match.start()] + marker + f"# below floor: {exp.code}"
        dropped.append(f"{seed.id}:{exp.line} {exp.code}")
    text = "\n".join(lines)
    if not markers({"x.py": text}):
        return None, dropped
    return dataclasses.replace(seed, text=text), dropped


def usable_seeds(seeds: Sequence[Seed], floor: Confidence = DEFAULT_MIN_CONFIDENCE) -> tuple[list[Seed], list[str], list[str]]:
    """The seeds at the default floor, the ids of those left out, the markers taken off."""
    usable, left_out, dropped = [], [], []
    for seed in seeds:
        adjusted, taken = at_floor(seed, floor)
        dropped += taken
        if adjusted is None:
            left_out.append(seed.id)
        else:
            usable.append(adjusted)
    return usable, left_out, dropped


def run(
    seeds: Sequence[Seed], max_variants: int, *, rounds: int = 3, combos: bool = True, floor: Confidence = DEFAULT_MIN_CONFIDENCE
) -> Summary:
    usable, broken, dropped = usable_seeds(seeds, floor)
    summary = Summary(broken_seeds=broken, below_floor=dropped, seeds=len(usable))
    for variant in variants(usable, max_variants, rounds=rounds, combos=combos):
        summary.results.append(Result(variant, judge(variant.seed.kind, variant.tree, floor)))
    return summary
