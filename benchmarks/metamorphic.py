"""Metamorphic preservation of `offlint check` (issue 24, item 2).

Every bad and good example of every rule in rules/*.toml and every linter fixture is rewritten by
semantics-preserving transforms (tests/metamorphic/transforms.py); a bad variant must keep its
`# expect:` findings at the mapped lines, a good one must stay clean. Prints the preservation
rate per transform, per rule, per transform x rule and in total, and the first lost finding of
each transform (the seed, the transform, what was lost).

    python -m benchmarks.metamorphic [--json FILE] [--max-variants N] [--table FILE] [--min-confidence low]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE, Confidence
from tests.metamorphic.harness import Summary, run
from tests.metamorphic.seeds import all_seeds
from tests.metamorphic.transforms import TRANSFORMS


def _pct(kept: int, total: int) -> str:
    return f"{100 * kept / total:5.1f}% ({kept}/{total})" if total else "    -"


def render(summary: Summary, seconds: float) -> str:
    total = summary.total
    out = [
        f"metamorphic preservation: {_pct(total.kept, total.total)} over {total.total} variants "
        f"({len({r.variant.seed.id for r in summary.results})} seeds, {seconds:.0f} s)",
    ]
    out.append(
        f"markers the unchanged seeds miss at the default floor (not expected of their variants): "
        f"{len(summary.below_floor)}; seeds left out (no marker left, or a good seed not clean): "
        f"{', '.join(summary.broken_seeds) or 'none'}"
    )
    bad = [r for r in summary.results if r.variant.seed.kind == "bad"]
    good = [r for r in summary.results if r.variant.seed.kind == "good"]
    out.append(
        f"bad seeds' variants keeping every finding: {_pct(sum(r.verdict.preserved for r in bad), len(bad))}; "
        f"good seeds' variants staying clean: {_pct(sum(r.verdict.preserved for r in good), len(good))}"
    )
    out += ["", "per transform (single-transform variants; chains apart):"]
    for (transform, _), t in sorted(summary.by("transform").items(), key=lambda kv: (kv[1].rate, kv[0])):
        out.append(f"  {transform:26s} {_pct(t.kept, t.total)}")
    out += ["", "per rule (all variants):"]
    for (_, rule), t in sorted(summary.by("rule").items()):
        out.append(f"  {rule:10s} {_pct(t.kept, t.total)}")
    cells = summary.by("cell")
    rules = sorted({r for _, r in cells})
    transforms = sorted({t for t, _ in cells})
    out += ["", "transform x rule (% kept; blank: no variant):", "  " + " " * 26 + " ".join(f"{r[-6:]:>6s}" for r in rules)]
    for t in transforms:
        row = []
        for r in rules:
            cell = cells.get((t, r))
            row.append(f"{100 * cell.rate:6.0f}" if cell and cell.total else "      ")
        out.append(f"  {t:26s}" + " ".join(row))
    out += ["", "a lost finding per transform (worst first):"]
    firsts: dict[str, list[str]] = defaultdict(list)
    for r in summary.results:
        if r.verdict.preserved or len(r.variant.chain) != 1:
            continue
        name = r.variant.chain[0]
        if r.verdict.lost:
            e = r.verdict.lost[0]
            what = f"lost {e.code} at {e.file}:{e.line}"
        elif r.verdict.errors:
            what = f"error {r.verdict.errors[0]}"
        else:
            what = "new finding(s) " + ", ".join(f"{c} at {f}:{n}" for f, n, c in r.verdict.extra[:3])
        firsts[name].append(f"{r.variant.seed.id}: {what}")
    ranked = sorted(summary.by("transform").items(), key=lambda kv: kv[1].rate)
    for (transform, _), _tally in ranked:
        if transform in firsts:
            out.append(f"  {transform} ({len(firsts[transform])} failing): " + "; ".join(firsts[transform][:3]))
    never = sorted(set(TRANSFORMS) - set(transforms))
    if never:
        out += ["", "transforms that applied to no seed: " + ", ".join(never)]
    return "\n".join(out) + "\n"


def as_json(summary: Summary) -> dict[str, object]:
    return {
        "total": {"kept": summary.total.kept, "variants": summary.total.total, "rate": summary.total.rate},
        "per_transform": {t: {"kept": v.kept, "variants": v.total} for (t, _), v in summary.by("transform").items()},
        "per_rule": {r: {"kept": v.kept, "variants": v.total} for (_, r), v in summary.by("rule").items()},
        "cells": [{"transform": t, "rule": r, "kept": v.kept, "variants": v.total} for (t, r), v in summary.by("cell").items()],
        "broken_seeds": summary.broken_seeds,
        "below_floor": summary.below_floor,
        "failures": [
            {
                "seed": r.variant.seed.id,
                "chain": list(r.variant.chain),
                "lost": [f"{e.code} {e.file}:{e.line}" for e in r.verdict.lost],
                "extra": [f"{c} {f}:{n}" for f, n, c in r.verdict.extra] if r.variant.seed.kind == "good" else [],
                "errors": r.verdict.errors,
            }
            for r in summary.results
            if not r.verdict.preserved
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metamorphic", description=__doc__.splitlines()[0])
    parser.add_argument("--max-variants", type=int, default=5000, help="stop after this many variants (default 5000)")
    parser.add_argument(
        "--min-confidence", choices=[c.value for c in Confidence], default=DEFAULT_MIN_CONFIDENCE.value,
        help=f"the confidence floor findings are read at (default {DEFAULT_MIN_CONFIDENCE.value}, as `offlint check`)",
    )
    parser.add_argument("--json", type=Path, help="also write the numbers and every failure as JSON")
    parser.add_argument("--table", type=Path, help="also write the printed table to this file")
    args = parser.parse_args(argv)
    if args.max_variants < 1:
        print("error: --max-variants must be at least 1", file=sys.stderr)
        return 2
    started = time.perf_counter()
    summary = run(all_seeds(), args.max_variants, floor=Confidence(args.min_confidence))
    text = f"floor: {args.min_confidence}\n" + render(summary, time.perf_counter() - started)
    print(text, end="")
    if args.table:
        args.table.write_text(text, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(as_json(summary), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
