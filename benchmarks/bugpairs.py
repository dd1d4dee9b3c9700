"""Score the bug pairs: real capture bugs that projects fixed, each checked as a user would.

    python -m benchmarks.bugpairs [--only SLUG,...] [--json FILE]

Each `corpus/bugpairs/<slug>.toml` (written blind, shared/BLIND-ROUNDS.md "Bug pairs") names the
release just before a fix and the release just after, the hazard's line(s) before and the lines
that replaced it after. Both releases are downloaded (cached under `$OFFLINT_CACHE_DIR`), their
hashes checked, and the whole package is checked at the default confidence (`offlint check
<package>/`, not the file alone). A pair is *found* when every hazard line (or one of its
`alt_lines`) carries a finding of its code before the fix, and *quiet* when no finding of those
codes sits on the fixed lines after it.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.corpus import (
    CorpusError,
    CorpusUnavailable,
    Reported,
    run_offlint,
    sha256_of,
    tomllib,
)
from benchmarks.trees import TreeUnavailable, _unpack, cache_dir, pip_download

PAIRS = Path(__file__).resolve().parent.parent / "corpus" / "bugpairs"


@dataclass
class Outcome:
    slug: str
    found: bool = False
    quiet: bool = False
    before: list[str] = field(default_factory=list)  # what was reported on the hazard lines
    after: list[str] = field(default_factory=list)  # what was reported on the fixed lines
    error: str = ""


def _release(side: dict[str, Any], *, quiet: bool) -> Path:
    """The unpacked release of one side of a pair (downloaded once, its archive hash checked)."""
    requirement = str(side["requirement"])
    root = cache_dir() / "bugpairs" / requirement.replace("==", "-")
    if root.is_dir():
        return root
    downloads = cache_dir() / "downloads"
    archive = downloads / str(side["archive"])
    if not archive.is_file():
        try:
            pip_download(requirement, downloads, sdist=side.get("dist") == "sdist", quiet=quiet)
        except TreeUnavailable as exc:
            raise CorpusUnavailable(str(exc)) from exc
    if not archive.is_file():
        raise CorpusError(f"{requirement}: pip did not bring {archive.name}")
    if sha256_of(archive) != side["archive_sha256"]:
        raise CorpusError(f"{archive.name}: sha256 differs from the pair's")
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as zipped:
            members = [n for n in zipped.namelist() if n.endswith(".py")]
            root.mkdir(parents=True)
            for name in members:
                zipped.extract(name, root)
    else:
        _unpack(archive, root)
    return root


def _package(root: Path, path: str) -> Path:
    """The top package holding `path` (an sdist's project folder included)."""
    parts = Path(path).parts
    for depth in range(1, len(parts)):
        candidate = root.joinpath(*parts[:depth])
        if (candidate / "__init__.py").is_file():
            return candidate
    return root.joinpath(*parts[:-1])


def _check(root: Path, paths: Sequence[str]) -> list[Reported]:
    packages = sorted({_package(root, p) for p in paths})
    files = sorted(f for package in packages for f in package.rglob("*.py"))
    located = {f.resolve(): ("", f.relative_to(root).as_posix()) for f in files}
    reported, _ = run_offlint(files, None, located)
    return reported


def score_pair(source: Path, *, quiet: bool = True) -> Outcome:
    document = tomllib.loads(source.read_text(encoding="utf-8"))
    outcome = Outcome(str(document.get("slug", source.stem)))
    try:
        before_root = _release(document["before"], quiet=quiet)
        after_root = _release(document["after"], quiet=quiet)
    except (CorpusUnavailable, CorpusError, KeyError) as exc:
        outcome.error = str(exc)
        return outcome
    hazards = document["before"].get("hazard", [])
    fixed = document["after"].get("fixed", [])
    for hazard in hazards:
        if sha256_of(before_root / hazard["path"]) != hazard["sha256"]:
            outcome.error = f"{hazard['path']}: sha256 differs"
            return outcome
    before = _check(before_root, [h["path"] for h in hazards])
    codes = {h["code"] for h in hazards}
    hits = []
    for hazard in hazards:
        lines = {int(hazard["line"]), *(int(x) for x in hazard.get("alt_lines", ()))}
        matched = [r for r in before if r.path == hazard["path"] and r.line in lines and r.code == hazard["code"]]
        hits.append(bool(matched))
        outcome.before += [f"{r.path}:{r.line} {r.code} {r.message}" for r in before if r.path == hazard["path"] and r.line in lines]
    outcome.found = bool(hits) and all(hits)
    after = _check(after_root, [f["path"] for f in fixed]) if fixed else []
    for item in fixed:
        lines = {int(x) for x in item.get("lines", ())}
        outcome.after += [
            f"{r.path}:{r.line} {r.code} {r.message}" for r in after if r.path == item["path"] and r.line in lines and r.code in codes
        ]
    outcome.quiet = not outcome.after
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bugpairs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated slugs")
    parser.add_argument("--json", type=Path, help="also write the outcomes here as JSON")
    arguments = parser.parse_args(argv)
    only = {s for s in arguments.only.split(",") if s}
    outcomes = []
    for source in sorted(PAIRS.glob("*.toml")):
        if only and source.stem not in only:
            continue
        outcome = score_pair(source, quiet=False)
        outcomes.append(outcome)
        state = "error" if outcome.error else ("FOUND" if outcome.found else "missed") + (", quiet after" if outcome.quiet else ", NOT quiet after")
        print(f"{outcome.slug}: {state} {outcome.error}", flush=True)
        for line in outcome.before:
            print(f"    before: {line}")
        for line in outcome.after:
            print(f"    after:  {line}")
    scored = [o for o in outcomes if not o.error]
    found = sum(o.found for o in scored)
    quiet = sum(o.quiet for o in scored)
    print(f"\nfound before the fix: {found}/{len(scored)}; quiet after: {quiet}/{len(scored)}; errors: {len(outcomes) - len(scored)}")
    if arguments.json is not None:
        arguments.json.write_text(json.dumps([o.__dict__ for o in outcomes], indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
