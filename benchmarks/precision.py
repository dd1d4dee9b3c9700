"""A sampled-precision record: how many of offlint's default-confidence findings on real serving
engines a person reading the code judges to be real.

    .venv/bin/python -m benchmarks.precision [--seed N] [--size 30] [--trees sglang,vllm,deepspeed]
                                             [--all] [--unjudged] [--json FILE]

Each tree (a released source, `benchmarks.trees.get_tree`) is checked with
`offlint check --select ALL --output-format json --no-cache --exit-zero` at the default confidence.
The findings are pooled, one per (tree, path relative to the tree root, line, code), and a seeded
sample (`random.Random(seed)`, drawn across the whole pool, sorted first so the draw depends only
on the pool) is joined with the hand verdicts in `benchmarks/precision-verdicts.toml`:

    [[verdict]]
    tree = "sglang"
    path = "sglang/srt/utils/offloader.py"
    line = 379
    code = "OFL201"
    verdict = "true"          # "true" | "plausible" | "false"
    reason = "one line: why (the caller, the guard, the capture that reaches it)"
    judged = "2025-01-01"

"true": the code breaks a capture (or is the silent hazard the rule names) when the engine runs it
as it does; "plausible": it sits on a path an engine captures or could capture and the pattern
would fail there; "false": it cannot happen (never runs under capture, or the analysis is wrong).
Precision is (true + plausible) / judged, per tree and in total. `--all` takes the whole pool
instead of a sample (to find what is left to judge), `--unjudged` lists only findings without a
verdict, with the message and the reachability note, `--json FILE` writes the summary.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.trees import TREES, TreeUnavailable, get_tree

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VERDICTS = HERE / "precision-verdicts.toml"
DEFAULT_SEED = 20130
DEFAULT_SIZE = 30
DEFAULT_TREES = ("sglang", "vllm", "deepspeed")
VERDICT_VALUES = ("true", "plausible", "false")
GOOD = frozenset({"true", "plausible"})

Key = tuple[str, str, int, str]  # tree, path relative to the tree root, line, code


@dataclass(frozen=True)
class Finding:
    tree: str
    path: str
    line: int
    column: int
    code: str
    confidence: str
    message: str
    note: str

    @property
    def key(self) -> Key:
        return (self.tree, self.path, self.line, self.code)


@dataclass(frozen=True)
class Verdict:
    tree: str
    path: str
    line: int
    code: str
    verdict: str
    reason: str
    judged: str

    @property
    def key(self) -> Key:
        return (self.tree, self.path, self.line, self.code)


class VerdictsError(ValueError):
    """The verdicts file is malformed."""


# --------------------------------------------------------------------------- collecting


def run_offlint(root: Path) -> dict[str, Any]:
    """`offlint check` of one tree at the default confidence, as parsed JSON."""
    command = [
        sys.executable, "-m", "offlint", "check", "--select", "ALL",
        "--output-format", "offlint-json", "--no-cache", "--exit-zero", str(root),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"offlint check {root} exited {done.returncode}:\n{tail}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def findings_of(tree: str, root: Path, report: dict[str, Any]) -> list[Finding]:
    found: list[Finding] = []
    for diagnostic in report.get("diagnostics", []):
        filename = Path(diagnostic["filename"])
        try:
            relative = filename.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            relative = filename.as_posix()
        location = diagnostic.get("location") or {}
        found.append(
            Finding(
                tree=tree,
                path=relative,
                line=int(location.get("row", 0)),
                column=int(location.get("column", 0)),
                code=str(diagnostic["code"]),
                confidence=str(diagnostic.get("confidence") or ""),
                message=str(diagnostic.get("message") or ""),
                note=str(diagnostic.get("note") or ""),
            )
        )
    return found


def pool_findings(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per key (the first column on a line wins), sorted by tree, path, line, code."""
    pooled: dict[Key, Finding] = {}
    for finding in sorted(findings, key=lambda f: (f.key, f.column)):
        pooled.setdefault(finding.key, finding)
    return [pooled[key] for key in sorted(pooled)]


def draw(pool: Sequence[Finding], seed: int, size: int) -> list[Finding]:
    """A seeded sample drawn across the pool, in pool order."""
    if size >= len(pool):
        return list(pool)
    chosen = random.Random(seed).sample(range(len(pool)), size)
    return [pool[index] for index in sorted(chosen)]


# --------------------------------------------------------------------------- verdicts


def load_verdicts(path: Path) -> dict[Key, Verdict]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise VerdictsError(f"{path}: {exc}") from exc
    verdicts: dict[Key, Verdict] = {}
    for index, entry in enumerate(data.get("verdict", [])):
        where = f"{path.name}: verdict #{index + 1}"
        try:
            verdict = Verdict(
                tree=str(entry["tree"]),
                path=str(entry["path"]),
                line=int(entry["line"]),
                code=str(entry["code"]),
                verdict=str(entry["verdict"]),
                reason=str(entry["reason"]),
                judged=str(entry.get("judged", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise VerdictsError(f"{where}: missing or bad field {exc}") from exc
        if verdict.verdict not in VERDICT_VALUES:
            raise VerdictsError(f"{where}: verdict {verdict.verdict!r} not in {VERDICT_VALUES}")
        if not verdict.reason.strip() or "\n" in verdict.reason:
            raise VerdictsError(f"{where}: reason must be one non-empty line")
        earlier = verdicts.get(verdict.key)
        if earlier is not None and earlier.judged >= verdict.judged:
            # a finding is re-judged with a later date (the code it points at is re-read); two
            # verdicts of one day for one finding are a mistake
            raise VerdictsError(f"{where}: duplicate verdict for {verdict.key} (judged {verdict.judged})")
        verdicts[verdict.key] = verdict
    return verdicts


# --------------------------------------------------------------------------- reporting


@dataclass
class Tally:
    sampled: int = 0
    true: int = 0
    plausible: int = 0
    false: int = 0

    @property
    def judged(self) -> int:
        return self.true + self.plausible + self.false

    @property
    def unjudged(self) -> int:
        return self.sampled - self.judged

    @property
    def share(self) -> float | None:
        return (self.true + self.plausible) / self.judged if self.judged else None

    def add(self, verdict: Verdict | None) -> None:
        self.sampled += 1
        if verdict is not None:
            setattr(self, verdict.verdict, getattr(self, verdict.verdict) + 1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "sampled": self.sampled, "judged": self.judged, "unjudged": self.unjudged,
            "true": self.true, "plausible": self.plausible, "false": self.false,
            "share_true_or_plausible": self.share,
        }  # fmt: skip

    def line(self, label: str) -> str:
        share = "n/a" if self.share is None else f"{self.share:.1%}"
        return (
            f"{label:<10} findings {self.sampled:>3}  judged {self.judged:>3}  "
            f"true {self.true:>3}  plausible {self.plausible:>3}  false {self.false:>3}  "
            f"unjudged {self.unjudged:>3}  true-or-plausible {share}"
        )


def tally(
    items: Sequence[Finding], verdicts: dict[Key, Verdict], trees: Sequence[str]
) -> dict[str, Tally]:
    tallies = {tree: Tally() for tree in trees}
    total = Tally()
    for finding in items:
        verdict = verdicts.get(finding.key)
        tallies[finding.tree].add(verdict)
        total.add(verdict)
    tallies["total"] = total
    return tallies


def describe(finding: Finding, verdict: Verdict | None, *, full: bool) -> list[str]:
    head = f"{finding.tree}:{finding.path}:{finding.line}:{finding.column} {finding.code} [{finding.confidence}]"
    lines = [f"{head}  {verdict.verdict.upper() if verdict else 'UNJUDGED'}"]
    if verdict is not None:
        lines.append(f"    reason: {verdict.reason}")
    if full or verdict is None:
        lines.append(f"    message: {finding.message}")
        if finding.note:
            lines.append(f"    note: {finding.note}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.precision", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"sample seed (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--size", type=int, default=DEFAULT_SIZE, help=f"sample size (default {DEFAULT_SIZE})"
    )
    parser.add_argument(
        "--trees", default=",".join(DEFAULT_TREES), help="comma-separated trees (benchmarks.trees)"
    )
    parser.add_argument(
        "--all", action="store_true", help="take the whole pool instead of a sample"
    )
    parser.add_argument(
        "--unjudged", action="store_true", help="list only findings without a verdict"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="show message and note of judged findings too"
    )
    parser.add_argument("--verdicts", type=Path, default=VERDICTS, help="the verdicts file")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the summary as JSON")
    args = parser.parse_args(argv)

    trees = list(dict.fromkeys(name.strip() for name in args.trees.split(",") if name.strip()))
    unknown = [name for name in trees if name not in TREES]
    if unknown:
        parser.error(f"unknown trees {unknown}; known: {', '.join(TREES)}")
    if args.size < 1:
        parser.error("--size must be at least 1")
    try:
        verdicts = load_verdicts(args.verdicts)
    except VerdictsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    everything: list[Finding] = []
    for name in trees:
        try:
            root = get_tree(name)
        except TreeUnavailable as exc:
            print(f"error: {name}: {exc}", file=sys.stderr)
            return 2
        everything.extend(findings_of(name, root, run_offlint(root)))
    pool = pool_findings(everything)
    chosen = pool if args.all else draw(pool, args.seed, args.size)

    what = "whole pool" if args.all else f"sample seed={args.seed} size={args.size}"
    print(
        f"# {what}: {len(chosen)} of {len(pool)} default-confidence findings ({', '.join(trees)})"
    )
    for finding in chosen:
        verdict = verdicts.get(finding.key)
        if args.unjudged and verdict is not None:
            continue
        print("\n".join(describe(finding, verdict, full=args.verbose)))

    tallies = tally(chosen, verdicts, trees)
    print()
    print("# verdicts (share = (true + plausible) / judged)")
    for label, counts in tallies.items():
        print(counts.line(label))
    whole = tally(pool, verdicts, trees)["total"]
    print(whole.line("pool"))

    per_tree = Counter(finding.tree for finding in pool)
    per_code = Counter(finding.code for finding in pool)
    per_tree_code = Counter((finding.tree, finding.code) for finding in pool)
    print()
    print("# default-confidence findings (one per tree, path, line, code)")
    for name in trees:
        codes = ", ".join(
            f"{code} {n}" for (tree, code), n in sorted(per_tree_code.items()) if tree == name
        )
        print(f"{name:<10} {per_tree[name]:>4}  {codes}")
    print(
        f"{'total':<10} {len(pool):>4}  "
        + ", ".join(f"{code} {n}" for code, n in sorted(per_code.items()))
    )
    pooled_keys = {finding.key for finding in pool}
    stale = sorted(key for key in verdicts if key[0] in trees and key not in pooled_keys)
    if stale:
        print(
            f"\n{len(stale)} verdict(s) match no current finding (kept: the analysis may bring them back)"
        )

    if args.json:
        summary = {
            "seed": None if args.all else args.seed,
            "requested_size": None if args.all else args.size,
            "size": len(chosen),
            "trees": {name: TREES[name].requirement for name in trees},
            "pool": {
                "total": len(pool),
                "per_tree": dict(per_tree),
                "per_code": dict(sorted(per_code.items())),
            },
            "verdicts": {label: counts.as_dict() for label, counts in tallies.items()},
            "pool_verdicts": whole.as_dict(),
            "stale_verdicts": len(stale),
            "sample": [
                {
                    "tree": f.tree,
                    "path": f.path,
                    "line": f.line,
                    "column": f.column,
                    "code": f.code,
                    "confidence": f.confidence,
                    "message": f.message,
                    "note": f.note,
                    "verdict": verdicts[f.key].verdict if f.key in verdicts else None,
                    "reason": verdicts[f.key].reason if f.key in verdicts else None,
                }
                for f in chosen
            ],
        }
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
