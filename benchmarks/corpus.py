"""The real-code corpus: hand-annotated files from released sources, scored against offlint.

    python -m benchmarks.corpus [--project P] [--min-confidence C] [--json FILE]

Each `corpus/<project>.toml` (format: corpus/README.md) pins a release on the package registry and
lists files inside it with the findings offlint must report (`expect`) and lines it must leave
alone (`clean`). This module downloads each release with pip into `$OFFLINT_CACHE_DIR/downloads`
(default `~/.cache/offlint-trees`; an archive already there is reused), verifies the archive's
sha256, extracts only the listed files into `<cache>/corpus/<project>-<version>/`, verifies each
file's sha256, runs `offlint check` once over all of them and scores the report:

- TP: an expect matched by a reported diagnostic with the same (file, line, code);
- FN: an expect nothing matched;
- FP: a reported diagnostic that matches no expect (listed as `clean` or not).

Offline (pip or the registry fails) `CorpusUnavailable` is raised with the reason, so tests can
skip; an invalid toml, or a hash that does not match, raises `CorpusError`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - python 3.10
    import tomli as tomllib

from benchmarks.trees import TreeUnavailable, cache_dir, pip_download

REPO = Path(__file__).resolve().parent.parent
CORPUS_DIR = REPO / "corpus"
RECALL_BAR = 0.90
PRECISION_BAR = 0.90

ROLES = frozenset(
    {"offloader", "capture-driver", "scheduler", "allocator", "loader", "model", "kernel", "communication", "other"}
)
DISTS = frozenset({"wheel", "sdist"})
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CODE = re.compile(r"OFL[1-9][0-9]{2}")
_REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)")
_TOP_KEYS = {"project": True, "requirement": True, "dist": True, "archive": True, "archive_sha256": True, "file": False}
_FILE_KEYS = {"path": True, "sha256": True, "role": True, "note": False, "expect": False, "clean": False, "allow": False}
# `real`: "driver" (real under a serving engine's graph runner) or "definition" (blind rounds)
_EXPECT_KEYS = {"line": True, "code": True, "reason": True, "real": False}
_CLEAN_KEYS = {"line": True, "reason": True}


class CorpusError(ValueError):
    """The corpus is wrong: an invalid toml, a hash that does not match, a line past a file's end."""


class CorpusUnavailable(RuntimeError):
    """A release could not be obtained (offline, registry or pip failure); the message says why."""


@dataclass(frozen=True)
class Expect:
    line: int
    code: str
    reason: str
    alts: tuple[int, ...] = ()  # other lines of the file that may carry the finding instead


@dataclass(frozen=True)
class Allow:
    """A finding that is defensible but not required: reported, it counts neither way."""

    line: int
    code: str


@dataclass(frozen=True)
class Clean:
    line: int
    reason: str


@dataclass(frozen=True)
class CorpusFile:
    path: str  # inside the archive
    sha256: str
    role: str
    note: str
    expects: tuple[Expect, ...]
    cleans: tuple[Clean, ...]
    allows: tuple[Allow, ...] = ()


@dataclass(frozen=True)
class Project:
    name: str
    requirement: str
    dist: str
    archive: str
    archive_sha256: str
    files: tuple[CorpusFile, ...]
    source: Path  # the toml it came from

    @property
    def version(self) -> str:
        return self.requirement.split("==", 1)[1]


@dataclass(frozen=True)
class Reported:
    """One diagnostic offlint reported on a corpus file."""

    project: str
    path: str  # inside the archive
    line: int
    code: str
    message: str


@dataclass
class Tally:
    files: int = 0
    expects: int = 0
    tp: int = 0
    fn: int = 0
    fp: int = 0

    @property
    def recall(self) -> float:
        return self.tp / self.expects if self.expects else 1.0

    @property
    def precision(self) -> float:
        found = self.tp + self.fp
        return self.tp / found if found else 1.0

    def add(self, other: Tally) -> None:
        self.files += other.files
        self.expects += other.expects
        self.tp += other.tp
        self.fn += other.fn
        self.fp += other.fp


@dataclass
class Score:
    projects: dict[str, Tally] = field(default_factory=dict)
    total: Tally = field(default_factory=Tally)
    false_negatives: list[tuple[str, str, Expect]] = field(default_factory=list)  # (project, path, expect)
    false_positives: list[Reported] = field(default_factory=list)
    clean_violations: list[tuple[Clean, Reported]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # files offlint could not analyse

    def meets_bars(self, recall: float = RECALL_BAR, precision: float = PRECISION_BAR) -> bool:
        return self.total.recall >= recall and self.total.precision >= precision


# -- loading and validating -------------------------------------------------------------------


def _check_keys(table: Mapping[str, Any], keys: Mapping[str, bool], where: str) -> None:
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise CorpusError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(keys)})")
    for key, required in keys.items():
        if required and key not in table:
            raise CorpusError(f"{where}: missing {key!r}")


def _string(table: Mapping[str, Any], key: str, where: str, *, empty: bool = False) -> str:
    value = table.get(key, "")
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise CorpusError(f"{where}: {key!r} must be a non-empty string")
    return value


def _one_line(table: Mapping[str, Any], key: str, where: str) -> str:
    value = _string(table, key, where)
    if "\n" in value.strip():
        raise CorpusError(f"{where}: {key!r} must be one line")
    return value.strip()


def _line(table: Mapping[str, Any], where: str) -> int:
    value = table["line"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CorpusError(f"{where}: 'line' must be a positive integer, not {value!r}")
    return value


def _tables(table: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise CorpusError(f"{where}: {key!r} must be an array of tables ([[{key}]])")
    return value


def _sha256(table: Mapping[str, Any], key: str, where: str) -> str:
    value = _string(table, key, where)
    if not _SHA256.fullmatch(value):
        raise CorpusError(f"{where}: {key!r} must be 64 lowercase hex digits")
    return value


def _file(table: Mapping[str, Any], where: str) -> CorpusFile:
    _check_keys(table, _FILE_KEYS, where)
    path = _string(table, "path", where)
    where = f"{where} ({path})"
    parts = Path(path).parts
    if path.startswith("/") or "\\" in path or ".." in parts or not path.endswith(".py"):
        raise CorpusError(f"{where}: 'path' must be a relative .py path inside the archive")
    role = _string(table, "role", where)
    if role not in ROLES:
        raise CorpusError(f"{where}: role {role!r} is not one of {', '.join(sorted(ROLES))}")
    note = _string(table, "note", where, empty=True).strip() if "note" in table else ""
    expects: list[Expect] = []
    for index, item in enumerate(_tables(table, "expect", where), 1):
        at = f"{where} expect #{index}"
        _check_keys(item, _EXPECT_KEYS, at)
        code = _string(item, "code", at)
        if not _CODE.fullmatch(code):
            raise CorpusError(f"{at}: {code!r} is not a rule code (OFLnnn)")
        expects.append(Expect(_line(item, at), code, _one_line(item, "reason", at)))
    allows: list[Allow] = []
    for index, item in enumerate(_tables(table, "allow", where), 1):
        at = f"{where} allow #{index}"
        _check_keys(item, _EXPECT_KEYS, at)
        allows.append(Allow(_line(item, at), _string(item, "code", at)))
    cleans: list[Clean] = []
    for index, item in enumerate(_tables(table, "clean", where), 1):
        at = f"{where} clean #{index}"
        _check_keys(item, _CLEAN_KEYS, at)
        cleans.append(Clean(_line(item, at), _one_line(item, "reason", at)))
    seen: set[tuple[int, str]] = set()
    for expect in expects:
        if (expect.line, expect.code) in seen:
            raise CorpusError(f"{where}: expect {expect.code} at line {expect.line} is listed twice")
        seen.add((expect.line, expect.code))
    expected_lines = {expect.line for expect in expects}
    clean_lines: set[int] = set()
    for clean in cleans:
        if clean.line in clean_lines:
            raise CorpusError(f"{where}: clean line {clean.line} is listed twice")
        if clean.line in expected_lines:
            raise CorpusError(f"{where}: line {clean.line} is both an expect and clean")
        clean_lines.add(clean.line)
    return CorpusFile(
        path=path,
        sha256=_sha256(table, "sha256", where),
        role=role,
        note=note,
        expects=tuple(sorted(expects, key=lambda e: (e.line, e.code))),
        cleans=tuple(sorted(cleans, key=lambda c: c.line)),
        allows=tuple(allows),
    )


def parse_project(document: Mapping[str, Any], source: Path) -> Project:
    """A validated Project from a parsed `<project>.toml`; CorpusError names what is wrong."""
    where = source.name
    _check_keys(document, _TOP_KEYS, where)
    name = _string(document, "project", where)
    if name != source.stem:
        raise CorpusError(f"{where}: project {name!r} must match the file name ({source.stem!r})")
    requirement = _string(document, "requirement", where)
    if not _REQUIREMENT.fullmatch(requirement):
        raise CorpusError(f"{where}: requirement {requirement!r} must pin one release (name==version)")
    dist = _string(document, "dist", where)
    if dist not in DISTS:
        raise CorpusError(f"{where}: dist {dist!r} must be 'wheel' or 'sdist'")
    archive = _string(document, "archive", where)
    is_wheel = archive.endswith(".whl")
    if "/" in archive or "\\" in archive or is_wheel != (dist == "wheel"):
        raise CorpusError(f"{where}: archive {archive!r} must be the file name of the {dist}")
    if not is_wheel and not archive.endswith((".tar.gz", ".zip", ".tgz")):
        raise CorpusError(f"{where}: archive {archive!r} is not an sdist (.tar.gz or .zip)")
    files = [_file(item, f"{where} file #{index}") for index, item in enumerate(_tables(document, "file", where), 1)]
    if not files:
        raise CorpusError(f"{where}: no [[file]] entries")
    paths = [corpus_file.path for corpus_file in files]
    duplicate = next((path for path in paths if paths.count(path) > 1), None)
    if duplicate:
        raise CorpusError(f"{where}: file {duplicate!r} is listed twice")
    return Project(
        name=name,
        requirement=requirement,
        dist=dist,
        archive=archive,
        archive_sha256=_sha256(document, "archive_sha256", where),
        files=tuple(files),
        source=source,
    )


def load_project(path: Path) -> Project:
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CorpusError(f"{path.name}: cannot read: {exc}") from exc
    return parse_project(document, path)


def load_corpus(directory: Path = CORPUS_DIR, only: Iterable[str] = ()) -> list[Project]:
    """Every `<project>.toml` in `directory` (or those named in `only`), validated."""
    wanted = set(only)
    projects = [load_project(path) for path in sorted(directory.glob("*.toml")) if not wanted or path.stem in wanted]
    missing = wanted - {project.name for project in projects}
    if missing:
        raise CorpusError(f"no corpus file for {', '.join(sorted(missing))} in {directory}")
    return projects


# -- obtaining the files ----------------------------------------------------------------------


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def wheel_tag_options(archive: str) -> list[str]:
    """pip options that make `pip download` pick exactly this wheel on any machine: a platform
    wheel (`cp311-cp311-manylinux_2_34_x86_64`) is asked for by its tags, not the host's."""
    parts = archive[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        raise CorpusError(f"{archive}: not a wheel file name (name-version[-build]-python-abi-platform.whl)")
    python_tag, abi, platform = parts[-3:]
    if platform == "any":
        return []
    options: list[str] = []
    for plat in platform.split("."):
        options += ["--platform", plat]
    versions = sorted(
        (int(tag[2]), int(tag[3:]))
        for tag in python_tag.split(".")
        if re.fullmatch(r"(cp|py)3\d+", tag)
    )
    if abi == "abi3" or not versions:  # stable ABI: the running Python, if new enough
        version = max([(sys.version_info[0], sys.version_info[1]), *versions[-1:]])
    else:
        version = versions[-1]
    implementation = python_tag[:2] if python_tag[:2] in ("cp", "pp") else "py"
    options += ["--python-version", f"{version[0]}.{version[1]}", "--implementation", implementation]
    for item in abi.split("."):
        options += ["--abi", item]
    return options


def fetch_archive(project: Project, *, quiet: bool = True) -> Path:
    """The project's release archive in `<cache>/downloads`, downloaded if absent, hash-checked."""
    downloads = cache_dir() / "downloads"
    archive = downloads / project.archive
    for attempt in (1, 2):
        if not archive.is_file():
            options = wheel_tag_options(project.archive) if project.dist == "wheel" else []
            try:
                pip_download(project.requirement, downloads, sdist=project.dist == "sdist", extra=options, quiet=quiet)
            except TreeUnavailable as exc:
                raise CorpusUnavailable(str(exc)) from exc
            if not archive.is_file():
                got = sorted(found.name for found in downloads.glob(f"*{project.version}*"))
                raise CorpusError(
                    f"{project.source.name}: pip downloaded {', '.join(got) or 'nothing'}, "
                    f"not {project.archive}: fix 'archive' (and its sha256)"
                )
        actual = sha256_of(archive)
        if actual == project.archive_sha256:
            return archive
        if attempt == 1:  # a partial or foreign file in the cache: fetch it once more
            archive.unlink()
            continue
        raise CorpusError(
            f"{project.source.name}: {project.archive} has sha256 {actual}, the corpus pins {project.archive_sha256}"
        )
    raise AssertionError("unreachable")  # pragma: no cover


def _read_members(archive: Path, names: Sequence[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    wanted = set(names)
    try:
        if archive.name.endswith((".whl", ".zip")):
            with zipfile.ZipFile(archive) as zipped:
                for name in wanted & set(zipped.namelist()):
                    found[name] = zipped.read(name)
        else:
            with tarfile.open(archive) as tarred:
                for member in tarred:
                    if member.name in wanted and member.isfile():
                        handle = tarred.extractfile(member)
                        if handle is not None:
                            found[member.name] = handle.read()
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise CorpusError(f"{archive.name}: cannot read: {exc}") from exc
    return found


def extraction_root(project: Project) -> Path:
    return cache_dir() / "corpus" / f"{project.name}-{project.version}"


def extract_files(project: Project, archive: Path) -> dict[str, Path]:
    """Each listed file of the project, extracted under `extraction_root`, its sha256 checked and
    its annotated lines checked against its length. Maps the archive path to the extracted one."""
    root = extraction_root(project)
    where = project.source.name
    result = {corpus_file.path: root / corpus_file.path for corpus_file in project.files}
    stale = [
        corpus_file.path
        for corpus_file in project.files
        if not result[corpus_file.path].is_file() or sha256_of(result[corpus_file.path]) != corpus_file.sha256
    ]
    if stale:
        members = _read_members(archive, stale)
        for name in stale:
            data = members.get(name)
            if data is None:
                raise CorpusError(f"{where}: {name} is not in {archive.name}")
            target = result[name]
            target.parent.mkdir(parents=True, exist_ok=True)
            temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            temporary.write_bytes(data)
            temporary.replace(target)
    for corpus_file in project.files:
        path = result[corpus_file.path]
        actual = sha256_of(path)
        if actual != corpus_file.sha256:
            raise CorpusError(f"{where}: {corpus_file.path} has sha256 {actual}, the corpus pins {corpus_file.sha256}")
        check_lines(project, corpus_file, path.read_bytes())
    return result


def check_lines(project: Project, corpus_file: CorpusFile, data: bytes) -> None:
    """CorpusError when an annotated line lies past the end of the file."""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)  # as Python numbers them
    for line in [e.line for e in corpus_file.expects] + [c.line for c in corpus_file.cleans]:
        if line > lines:
            raise CorpusError(f"{project.source.name}: {corpus_file.path}: line {line} is past the file's end ({lines} lines)")


def prepare(projects: Sequence[Project], *, quiet: bool = True) -> dict[Path, tuple[str, str]]:
    """Download, verify and extract every project: extracted path → (project, archive path)."""
    located: dict[Path, tuple[str, str]] = {}
    for project in projects:
        archive = fetch_archive(project, quiet=quiet)
        for name, path in extract_files(project, archive).items():
            located[path.resolve()] = (project.name, name)
    return located


# -- running offlint and scoring -------------------------------------------------------------


def run_offlint(
    files: Sequence[Path], min_confidence: str | None = None, located: Mapping[Path, tuple[str, str]] | None = None
) -> tuple[list[Reported], list[str]]:
    """`offlint check` (this checkout's) once over `files`: the diagnostics, and the run's errors.
    An empty `offlint.toml` is passed as the configuration, so no pyproject.toml above the cache
    changes the default selection."""
    located = located if located is not None else {path.resolve(): ("", str(path)) for path in files}
    with tempfile.TemporaryDirectory(prefix="offlint-corpus-") as scratch:
        config = Path(scratch) / "offlint.toml"
        config.write_text("", encoding="utf-8")
        command = [sys.executable, "-m", "offlint", "check", "--output-format", "offlint-json", "--no-cache", "--exit-zero"]
        command += ["--config", str(config)]
        if min_confidence is not None:
            command += ["--min-confidence", min_confidence]
        command += [str(path) for path in files]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"offlint check failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}") from exc
    reported: list[Reported] = []
    for diagnostic in document["diagnostics"]:
        key = Path(diagnostic["filename"]).resolve()
        project, path = located.get(key, ("", diagnostic["filename"]))
        reported.append(
            Reported(project, path, int(diagnostic["location"]["row"]), diagnostic["code"], diagnostic["message"])
        )
    errors = [json.dumps(error, sort_keys=True) for error in document.get("errors", [])]
    return reported, errors


def score(projects: Sequence[Project], reported: Iterable[Reported], errors: Sequence[str] = ()) -> Score:
    """Match the report against the expectations: per project and in total."""
    result = Score(errors=list(errors))
    by_key: dict[tuple[str, str, int, str], Reported] = {}
    for item in reported:
        by_key.setdefault((item.project, item.path, item.line, item.code), item)
    expected: set[tuple[str, str, int, str]] = set()
    cleans: dict[tuple[str, str, int], Clean] = {}
    for project in projects:
        tally = Tally()
        for corpus_file in project.files:
            tally.files += 1
            for allow in corpus_file.allows:
                expected.add((project.name, corpus_file.path, allow.line, allow.code))
            for expect in corpus_file.expects:
                keys = [(project.name, corpus_file.path, line, expect.code) for line in (expect.line, *expect.alts)]
                expected.update(keys)
                tally.expects += 1
                if any(key in by_key for key in keys):
                    tally.tp += 1
                else:
                    tally.fn += 1
                    result.false_negatives.append((project.name, corpus_file.path, expect))
            for clean in corpus_file.cleans:
                cleans[(project.name, corpus_file.path, clean.line)] = clean
        result.projects[project.name] = tally
    for key, item in sorted(by_key.items()):
        if key in expected:
            continue
        result.false_positives.append(item)
        if item.project in result.projects:
            result.projects[item.project].fp += 1
        pinned = cleans.get((item.project, item.path, item.line))
        if pinned is not None:
            result.clean_violations.append((pinned, item))
    for tally in result.projects.values():
        result.total.add(tally)
    result.total.fp += sum(1 for item in result.false_positives if item.project not in result.projects)
    return result


def evaluate(
    only: Iterable[str] = (), min_confidence: str | None = None, *, directory: Path = CORPUS_DIR, quiet: bool = True
) -> tuple[list[Project], Score]:
    projects = load_corpus(directory, only)
    located = prepare(projects, quiet=quiet)
    reported, errors = run_offlint(sorted(located), min_confidence, located)
    return projects, score(projects, reported, errors)


# -- reporting --------------------------------------------------------------------------------


def _percent(value: float) -> str:
    return f"{100 * value:5.1f}%"


def format_score(result: Score) -> str:
    header = f"{'project':<16} {'files':>5} {'expects':>7} {'TP':>4} {'FN':>4} {'FP':>4} {'recall':>7} {'precision':>9}"
    lines = [header, "-" * len(header)]
    rows = [*sorted(result.projects.items()), ("total", result.total)]
    for index, (name, tally) in enumerate(rows):
        if index == len(rows) - 1:
            lines.append("-" * len(header))
        lines.append(
            f"{name:<16} {tally.files:>5} {tally.expects:>7} {tally.tp:>4} {tally.fn:>4} {tally.fp:>4} "
            f"{_percent(tally.recall):>7} {_percent(tally.precision):>9}"
        )
    if result.false_negatives:
        lines += ["", f"missed (FN, {len(result.false_negatives)}):"]
        for project, path, expect in result.false_negatives:
            lines.append(f"  {project}: {path}:{expect.line} {expect.code} {expect.reason}")
    if result.false_positives:
        lines += ["", f"not expected (FP, {len(result.false_positives)}):"]
        for item in result.false_positives:
            lines.append(f"  {item.project}: {item.path}:{item.line} {item.code} {item.message}")
    if result.clean_violations:
        lines += ["", f"clean lines reported ({len(result.clean_violations)}):"]
        for clean, item in result.clean_violations:
            lines.append(f"  {item.project}: {item.path}:{item.line} {item.code} (clean: {clean.reason})")
    if result.errors:
        lines += ["", f"files offlint could not analyse ({len(result.errors)}):"]
        lines += [f"  {error}" for error in result.errors]
    verdict = "meets" if result.meets_bars() else "BELOW"
    lines += ["", f"{verdict} the bars (recall >= {RECALL_BAR:.0%}, precision >= {PRECISION_BAR:.0%})"]
    return "\n".join(lines)


def score_document(result: Score) -> dict[str, Any]:
    def tally(item: Tally) -> dict[str, Any]:
        return {
            "files": item.files,
            "expects": item.expects,
            "tp": item.tp,
            "fn": item.fn,
            "fp": item.fp,
            "recall": item.recall,
            "precision": item.precision,
        }

    return {
        "projects": {name: tally(item) for name, item in sorted(result.projects.items())},
        "total": tally(result.total),
        "false_negatives": [
            {"project": p, "path": path, "line": e.line, "code": e.code, "reason": e.reason}
            for p, path, e in result.false_negatives
        ],
        "false_positives": [
            {"project": r.project, "path": r.path, "line": r.line, "code": r.code, "message": r.message}
            for r in result.false_positives
        ],
        "clean_violations": [
            {"project": r.project, "path": r.path, "line": r.line, "code": r.code, "clean": c.reason}
            for c, r in result.clean_violations
        ],
        "errors": result.errors,
        "meets_bars": result.meets_bars(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", action="append", default=[], help="only this project (repeatable)")
    parser.add_argument("--min-confidence", help="passed to offlint check (default: its default)")
    parser.add_argument("--json", type=Path, help="also write the score here as JSON")
    arguments = parser.parse_args(argv)
    try:
        _, result = evaluate(arguments.project, arguments.min_confidence, quiet=False)
    except CorpusUnavailable as exc:
        print(f"corpus unavailable: {exc}", file=sys.stderr)
        return 2
    except CorpusError as exc:
        print(f"corpus error: {exc}", file=sys.stderr)
        return 2
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(score_document(result), indent=2) + "\n", encoding="utf-8")
    print(format_score(result))
    return 0 if result.meets_bars() and not result.errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
