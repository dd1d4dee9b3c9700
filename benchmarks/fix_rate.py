"""How much of what `check` reports `fix` fixes: issue 14's measure on the fixtures and the corpus.

    python -m benchmarks.fix_rate [--codes OFL101,OFL103,OFL201,OFL202,OFL204] [--json FILE]

For every file of `fixtures/` and of the annotated corpus (`benchmarks.corpus`, downloaded and
verified as there), runs `fix` in memory (`fixing.apply.fix_source`, every rule selected, every
fix opted into, at the default confidence floor) and counts, for the given codes, the findings
`check` reported before, those gone afterwards (fixed), and those left - each left one with the
reason `fix` gave (a "not fixed" note) or none. Prints the counts per code and in total.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from benchmarks.corpus import CorpusUnavailable, load_corpus, prepare
from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.fixing.apply import FixSettings, fix_source

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CODES = ("OFL101", "OFL103", "OFL201", "OFL202", "OFL204")


def files_to_measure() -> list[Path]:
    found = sorted((ROOT / "fixtures").rglob("*.py"))
    try:
        found += sorted(prepare(load_corpus()))
    except CorpusUnavailable as exc:
        print(f"corpus skipped: {exc}", file=sys.stderr)
    return found


def measure(paths: list[Path], codes: tuple[str, ...]) -> dict[str, Counter[str]]:
    select = frozenset(load_catalogue())
    tally: dict[str, Counter[str]] = {code: Counter() for code in codes}
    for path in paths:
        data = path.read_bytes()
        before = [d for d in check_source(data, str(path), FileSettings(select=select)).diagnostics if d.code in codes]
        if not before:
            continue
        result = fix_source(data, str(path), FixSettings(select=select))
        after = check_source(result.fixed, str(path), FileSettings(select=select)).diagnostics
        left = Counter(d.code for d in after if d.code in codes)
        explained = Counter(d.code for d in result.remaining)
        for code in codes:
            reported = sum(1 for d in before if d.code == code)
            if not reported:
                continue
            remaining = min(left[code], reported)
            tally[code]["reported"] += reported
            tally[code]["fixed"] += reported - remaining
            tally[code]["left, with a reason"] += min(remaining, explained[code])
            tally[code]["left, no reason"] += remaining - min(remaining, explained[code])
            tally[code]["files"] += 1
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codes", default=",".join(DEFAULT_CODES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    codes = tuple(c.strip() for c in args.codes.split(",") if c.strip())
    tally = measure(files_to_measure(), codes)
    total: Counter[str] = Counter()
    print(f"{'code':8} {'files':>5} {'reported':>8} {'fixed':>6} {'left+reason':>11} {'left-no-reason':>14}")
    for code, counts in tally.items():
        total.update(counts)
        print(
            f"{code:8} {counts['files']:5} {counts['reported']:8} {counts['fixed']:6} "
            f"{counts['left, with a reason']:11} {counts['left, no reason']:14}"
        )
    share = total["fixed"] / total["reported"] if total["reported"] else 0.0
    print(f"{'total':8} {total['files']:5} {total['reported']:8} {total['fixed']:6} "
          f"{total['left, with a reason']:11} {total['left, no reason']:14}   fixed {share:.1%}")
    if args.json:
        args.json.write_text(json.dumps({c: dict(v) for c, v in tally.items()}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
