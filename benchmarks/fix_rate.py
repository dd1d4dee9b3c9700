"""How much of what `check` reports `fix` fixes: issue 14's measure on the fixtures and the corpus.

    python -m benchmarks.fix_rate [--codes OFL101,OFL103,OFL201,OFL202,OFL204] [--json FILE]
                                  [--min-confidence medium] [--list]

For every file of `fixtures/` and of the annotated corpus (`benchmarks.corpus`, downloaded and
verified as there), runs `fix` in memory (`fixing.loop.fix_source`, every rule selected, every
fix opted into) and counts, for the given codes, the findings `check` reports before at the
confidence floor (default: `check`'s own, so what a user sees; `--min-confidence low` counts the
hidden ones too, and lets `fix` act on them), those gone afterwards (fixed), and those left -
each left one with the reason `fix` gave for it (a "not fixed: <reason>" line) or none. Also
checks the fix contract on every file: the output parses, a second `fix` changes nothing, and no
fixed code is back. Prints the counts per code and in total (`--list`: each left finding too).
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
from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE, Confidence
from offlint.fixing.apply import FixSettings
from offlint.fixing.loop import fix_source

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CODES = ("OFL101", "OFL103", "OFL201", "OFL202", "OFL204")


def files_to_measure() -> list[Path]:
    found = sorted((ROOT / "fixtures").rglob("*.py"))
    try:
        found += sorted(prepare(load_corpus()))
    except CorpusUnavailable as exc:
        print(f"corpus skipped: {exc}", file=sys.stderr)
    return found


def measure(
    paths: list[Path],
    codes: tuple[str, ...],
    floor: Confidence = DEFAULT_MIN_CONFIDENCE,
    capture_modes: tuple[str, ...] | None = None,
) -> tuple[dict[str, Counter[str]], list[str], list[str]]:
    """The tally per code; each finding left, as a line (with its reason when `fix` gave one);
    and each broken contract (an output that does not parse, a second run that changes it)."""
    select = frozenset(load_catalogue())
    tally: dict[str, Counter[str]] = {code: Counter() for code in codes}
    left_lines: list[str] = []
    broken: list[str] = []
    check = FileSettings(select=select, min_confidence=floor)
    # the capture modes the fixes must hold under (None: every mode, the default)
    fix = FixSettings(select=select, min_confidence=floor, **({"capture_modes": capture_modes} if capture_modes else {}))
    for path in paths:
        data = path.read_bytes()
        before = [
            d
            for d in check_source(data, str(path), check).diagnostics
            if d.code in codes and d.confidence.at_least(floor)
        ]
        if not before:
            continue
        result = fix_source(data, str(path), fix)
        after = [
            d
            for d in check_source(result.fixed, str(path), check).diagnostics
            if d.code in codes and d.confidence.at_least(floor)
        ]
        reasons = {(n.diagnostic.code, n.diagnostic.location.line): n.reason for n in result.not_fixed}
        left = Counter(d.code for d in after)
        explained = Counter(d.code for d in after if (d.code, d.location.line) in reasons)
        for d in after:
            why = reasons.get((d.code, d.location.line))
            left_lines.append(f"{path}:{d.location.line}: {d.code} " + (f"not fixed: {why}" if why else "(no reason)"))
        if result.changed:
            again = fix_source(result.fixed, str(path), fix)
            if again.changed:
                broken.append(f"{path}: a second fix changes the output")
            if result.errors:
                broken.append(f"{path}: {result.errors[0].message}")
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
    return tally, left_lines, broken


VERDICTS = Path(__file__).resolve().parent / "fix-rate-verdicts.toml"


def _verdicts() -> dict[str, str]:
    """`file:line: code` of each left finding judged by hand -> "verdict: reason"."""
    import tomllib

    rows = tomllib.loads(VERDICTS.read_text(encoding="utf-8"))["verdict"]
    return {f"{r['file']}:{r['line']}: {r['code']}": f"{r['verdict']}: {r['reason']}" for r in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codes", default=",".join(DEFAULT_CODES))
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--min-confidence", default=DEFAULT_MIN_CONFIDENCE.value, choices=[c.value for c in Confidence]
    )
    parser.add_argument("--list", action="store_true", help="print each finding left, with its reason")
    args = parser.parse_args(argv)
    codes = tuple(c.strip() for c in args.codes.split(",") if c.strip())
    tally, left_lines, broken = measure(files_to_measure(), codes, Confidence(args.min_confidence))
    print(f"findings at confidence >= {args.min_confidence}")
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
    if args.list:
        verdicts = _verdicts()
        for line in left_lines:
            verdict = next((v for key, v in verdicts.items() if key in line), "no verdict yet")
            print(f"{line}\n    verdict: {verdict}")
    for problem in broken:
        print(f"contract broken: {problem}")
    if args.json:
        args.json.write_text(json.dumps({c: dict(v) for c, v in tally.items()}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
