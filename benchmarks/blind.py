"""Score a blind set: files annotated by someone who never saw offlint, committed before any run.

    python -m benchmarks.blind corpus/blind/<round> [--min-confidence C] [--json FILE]

A blind set is a folder (corpus/blind/README.md): `<project>.toml` files in the corpus format
(released files from the registry, `corpus/README.md`) and `cases.toml` annotating the hand-written
`cases/*.py` beside it in the same format, with no sha256 (the files live in this repository).
The released files are checked as the corpus checks them (one run over all of them), the cases
as the tree they form (one run over `cases/`); both are scored together with
`benchmarks.corpus.score` and printed per project, `cases` being one project.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from benchmarks.corpus import (
    Allow,
    CorpusError,
    CorpusFile,
    CorpusUnavailable,
    Expect,
    Project,
    Reported,
    Score,
    _file,
    _tables,
    format_score,
    load_project,
    prepare,
    run_offlint,
    score,
    score_document,
    sha256_of,
    tomllib,
)
from benchmarks.trees import TreeUnavailable, _unpack, cache_dir, pip_download

CASES = "cases"


def check_trees(folder: Path, *, quiet: bool = True) -> dict[str, list[Reported]]:
    """The whole released trees of `trees.toml` (chosen by the annotator: no false default
    finding expected), each downloaded, unpacked under the cache and checked at the default
    floor: requirement -> what was reported (every one of them is a false finding)."""
    source = folder / "trees.toml"
    if not source.is_file():
        return {}
    document = tomllib.loads(source.read_text(encoding="utf-8"))
    found: dict[str, list[Reported]] = {}
    for index, tree in enumerate(_tables(document, "tree", source.name), 1):
        requirement, dist = str(tree.get("requirement", "")), str(tree.get("dist", ""))
        if "==" not in requirement or dist not in ("wheel", "sdist"):
            raise CorpusError(f"{source.name} tree #{index}: needs requirement NAME==VERSION and dist wheel|sdist")
        root = cache_dir() / "blind-trees" / requirement.replace("==", "-")
        if not root.is_dir():
            downloads = cache_dir() / "downloads"
            before = set(downloads.glob("*")) if downloads.is_dir() else set()
            try:
                pip_download(requirement, downloads, sdist=dist == "sdist", quiet=quiet)
            except TreeUnavailable as exc:
                raise CorpusUnavailable(str(exc)) from exc
            name = requirement.split("==")[0].replace("-", "_").lower()
            archives = [a for a in downloads.glob("*") if a not in before or a.name.lower().startswith(name)]
            archive = next(a for a in archives if a.name.lower().replace("-", "_").startswith(name))
            _unpack(archive, root)
        files = sorted(p for p in root.rglob("*.py") if p.is_file())
        reported, _ = run_offlint(files)
        found[requirement] = reported
    return found


_MARKER = re.compile(r"#\s*(expect|alt|allow):\s*(OFL\d{3}(?:\s*,\s*OFL\d{3})*)")


def load_marked_cases(folder: Path) -> Project | None:
    """Cases annotated in place (shared/BLIND-ROUNDS.md, "Markers"): `# expect: A, B` at the end of
    the line that must carry the finding, `# alt: A` on a line that may carry it instead,
    `# allow: A` where a finding is defensible but not required; `clean_*.py` files and unmarked
    files carry no expectation, so everything reported there is a false finding."""
    cases = folder / CASES
    if not cases.is_dir():
        return None
    files = []
    for path in sorted(cases.rglob("*.py")):
        relative = path.relative_to(folder).as_posix()
        expects: dict[str, list[int]] = {}
        alts: dict[str, list[int]] = {}
        allows: list[Allow] = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for kind, codes in _MARKER.findall(line):
                for code in (c.strip() for c in codes.split(",")):
                    if kind == "expect":
                        expects.setdefault(code, []).append(number)
                    elif kind == "alt":
                        alts.setdefault(code, []).append(number)
                    else:
                        allows.append(Allow(number, code))
        found = [
            Expect(line, code, "marked in the case", tuple(alts.get(code, ())))
            for code, lines in sorted(expects.items())
            for line in lines
        ]
        # an alt line for a code no expect names is a place the finding is allowed
        allows += [Allow(line, code) for code, lines in alts.items() if code not in expects for line in lines]
        role = "other"
        files.append(CorpusFile(relative, sha256_of(path), role, "", tuple(found), (), tuple(allows)))
    return Project(CASES, "cases==0", "sdist", "cases.tar.gz", "0" * 64, tuple(files), cases)


def clean_files(project: Project, reported: Iterable[Reported]) -> tuple[int, int]:
    """(clean files with no finding, clean files): `clean_*.py` and unmarked files."""
    hit = {item.path for item in reported if item.project == project.name}
    clean = [f for f in project.files if not f.expects and not f.allows]
    return sum(1 for f in clean if f.path not in hit), len(clean)


def load_cases(folder: Path) -> Project | None:
    """The hand-written cases of a blind set as one project, or None when it has none."""
    source = folder / "cases.toml"
    if not source.is_file():
        return load_marked_cases(folder)
    try:
        document = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CorpusError(f"{source}: cannot read: {exc}") from exc
    files = []
    for index, table in enumerate(_tables(document, "file", source.name), 1):
        path = folder / str(table.get("path", ""))
        if not path.is_file():
            raise CorpusError(f"{source.name} file #{index}: {table.get('path')!r} does not exist")
        files.append(_file({**table, "sha256": sha256_of(path)}, f"{source.name} file #{index}"))
    return Project(CASES, "cases==0", "sdist", "cases.tar.gz", "0" * 64, tuple(files), source)


def evaluate(
    folder: Path, min_confidence: str | None = None, *, quiet: bool = True, cases_only: bool = False
) -> tuple[list[Project], Score]:
    """Score the set; `cases_only`: the hand-written cases alone (no download)."""
    projects = [] if cases_only else [
        load_project(path) for path in sorted(folder.glob("*.toml")) if path.name not in ("cases.toml", "trees.toml")
    ]
    reported: list[Reported] = []
    errors: list[str] = []
    if projects:
        located = prepare(projects, quiet=quiet)
        found, failed = run_offlint(sorted(located), min_confidence, located)
        reported += found
        errors += failed
    cases = load_cases(folder)
    if cases is not None:
        located_cases = {(folder / f.path).resolve(): (CASES, f.path) for f in cases.files}
        found, failed = run_offlint(sorted(located_cases), min_confidence, located_cases)
        reported += found
        errors += failed
        projects.append(cases)
        CLEAN_FILES[str(folder)] = clean_files(cases, found)
    return projects, score(projects, reported, errors)


# (clean case files with no finding, clean case files) of the last evaluation of each set
CLEAN_FILES: dict[str, tuple[int, int]] = {}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.blind", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a blind set, e.g. corpus/blind/2026-12-05-a")
    parser.add_argument("--min-confidence", help="passed to offlint check (default: its default)")
    parser.add_argument("--json", type=Path, help="also write the score here as JSON")
    parser.add_argument("--cases-only", action="store_true", help="only the hand-written cases (no download)")
    parser.add_argument("--trees", action="store_true", help="check the whole trees of trees.toml instead")
    arguments = parser.parse_args(argv)
    if arguments.trees:
        try:
            trees = check_trees(arguments.folder, quiet=False)
        except (CorpusUnavailable, CorpusError) as exc:
            print(f"blind set trees unavailable: {exc}", file=sys.stderr)
            return 2
        for requirement, reported in trees.items():
            print(f"{requirement}: {len(reported)} default finding(s) (each a false one)")
            for item in reported:
                print(f"  {item.path}:{item.line} {item.code} {item.message}")
        return 0 if not any(trees.values()) else 1
    try:
        _, result = evaluate(arguments.folder, arguments.min_confidence, quiet=False, cases_only=arguments.cases_only)
    except CorpusUnavailable as exc:
        print(f"blind set unavailable: {exc}", file=sys.stderr)
        return 2
    except CorpusError as exc:
        print(f"blind set error: {exc}", file=sys.stderr)
        return 2
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(score_document(result), indent=2) + "\n", encoding="utf-8")
    print(format_score(result))
    clean = CLEAN_FILES.get(str(arguments.folder))
    if clean is not None and clean[1]:
        print(f"clean case files with no finding: {clean[0]}/{clean[1]} ({100 * clean[0] / clean[1]:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
