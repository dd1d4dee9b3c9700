"""`.offlint_cache/`: results of earlier runs, keyed on what a file's result depends on.

A file's result is a function of its bytes, the settings that apply to it (selection, configured
capture-reachable names) and the analysis itself (offlint's version, its source code, the rule
catalogue, libcst's version). The first two form each entry's key; the third names the cache
file, so a new offlint or an edited rule starts from an empty cache. Results are keyed on
content, never on paths: a result found under a content hash is right whatever the file is called.

A stat index in front of it spares a warm run reading and hashing every file (as git's index and
ruff's cache do): resolved path -> (size, mtime, ctime, inode) -> content hash. ctime cannot be set
by a user (`touch -d` sets mtime only) and changes on every write, so an edit that keeps size and
mtime is still seen. A file changed within `RACY_SECONDS` of the run is never indexed: a second
edit inside the same timestamp tick could otherwise go unseen (git's "racily clean" entries).

Robustness: the cache is JSON (never pickle: a cache folder can come with a checked-out tree),
written to a temporary file and renamed into place, so readers see an old or a new file, never
half of one. A file or entry that does not read back as expected is ignored (a miss). Concurrent
runs merge: each writer re-reads what is on disk just before replacing it. Entries unused for
`MAX_AGE_DAYS` are dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

from offlint import __version__
from offlint.diagnostics import (
    Confidence,
    Diagnostic,
    ErrorKind,
    FileError,
    FileReport,
    FixSafety,
    Location,
)

try:  # blake2b without loading OpenSSL (hashlib's import costs a warm run ~2 ms more)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without the builtin module
    from hashlib import blake2b

CACHE_DIR_NAME = ".offlint_cache"
FORMAT = 5
MAX_AGE_DAYS = 30
RACY_SECONDS = 2  # coarser than any timestamp tick of a local filesystem (FAT's is 2 s)
_PACKAGE = Path(__file__).resolve().parent.parent


def _libcst_version() -> str:
    """libcst's version file, read without importing libcst (or importlib.metadata): a warm run
    imports neither."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("libcst")
        if spec is None or not spec.submodule_search_locations:
            return "?"
        folder = Path(next(iter(spec.submodule_search_locations)))
        return (folder / "_version.py").read_text(encoding="utf-8")
    except (ImportError, OSError, ValueError, StopIteration):  # pragma: no cover - odd installs
        return "?"


@cache
def engine_key() -> str:
    """Everything global a result depends on: versions, offlint's code, the rule catalogue.

    Code and rule files count by name, size and modification time, not by bytes: the signal
    Python's own import system trusts to re-compile a module, so the cache is never staler than
    the code running, and a warm run reads none of them."""
    digest = blake2b(digest_size=16)
    for part in (str(FORMAT), __version__, _libcst_version(), f"{sys.version_info[:2]}"):
        digest.update(part.encode() + b"\0")
    sources = _files_below(str(_PACKAGE), ".py")
    try:
        from offlint.catalogue import catalogue_dir

        sources += _files_below(str(catalogue_dir()), ".toml")
    except Exception:  # pragma: no cover - no catalogue: the run fails elsewhere
        pass
    for path in sources:
        try:
            info = os.stat(path)
            signature = f"{info.st_size}:{info.st_mtime_ns}"
        except OSError:
            signature = "?"
        digest.update(f"{path}\0{signature}\0".encode())
    return digest.hexdigest()


def _files_below(folder: str, suffix: str) -> list[str]:
    found: list[str] = []
    with contextlib.suppress(OSError), os.scandir(folder) as listing:
        for entry in listing:
            if entry.name.endswith(suffix) and entry.is_file():
                found.append(entry.path)
            elif entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                found.extend(_files_below(entry.path, suffix))
    return sorted(found)


def content_digest(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


def result_key(digest: str, settings_key: str) -> str:
    return digest + ":" + _settings_digest(settings_key)


def stat_signature(info: os.stat_result) -> list[int]:
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]


@cache
def _settings_digest(settings_key: str) -> str:
    return blake2b(settings_key.encode(), digest_size=8).hexdigest()


def _today() -> int:
    return int(time.time() // 86400)


class ResultCache:
    """One JSON file per engine key under `<root>/.offlint_cache/`."""

    def __init__(self, folder: Path, key: str | None = None) -> None:
        self.folder = folder
        self.engine = key or engine_key()
        self.path = folder / f"results-{self.engine[:24]}.json"
        self.fresh: dict[str, dict[str, Any]] = {}  # written this run
        self.touched: set[str] = set()
        self.today = _today()
        # files changed after this are too fresh to index
        self.racy_after_ns = time.time_ns() - RACY_SECONDS * 1_000_000_000
        # stat index: resolved path -> [size, mtime_ns, ctime_ns, inode, content digest, day used]
        self.fresh_index: dict[str, list[Any]] = {}
        self.touched_index: set[str] = set()
        self.entries, self.index = self._read()

    @classmethod
    def at(cls, root: Path) -> ResultCache:
        return cls(root / CACHE_DIR_NAME)

    def _read(self) -> tuple[dict[str, dict[str, Any]], dict[str, list[Any]]]:
        try:
            raw = json.loads(self.path.read_bytes())
        except (OSError, ValueError, UnicodeDecodeError):
            return {}, {}
        if not isinstance(raw, dict) or raw.get("engine") != self.engine:
            return {}, {}
        entries = raw.get("entries")
        index = raw.get("files")
        return (entries if isinstance(entries, dict) else {}), (index if isinstance(index, dict) else {})

    # ---------------------------------------------------------------- stat index
    def known_digest(self, real: str, info: os.stat_result) -> str | None:
        """The content digest of a file unchanged since it was indexed, else None."""
        row = self.index.get(real)
        if not isinstance(row, list) or len(row) != 6 or row[:4] != stat_signature(info):
            return None
        if row[5] != self.today:
            self.touched_index.add(real)
        digest = row[4]
        return digest if isinstance(digest, str) else None

    def remember(self, real: str, info: os.stat_result, digest: str) -> None:
        """Index a file just read; not one changed so recently that a same-tick edit may follow."""
        if max(info.st_mtime_ns, info.st_ctime_ns) >= self.racy_after_ns:
            return
        row = [*stat_signature(info), digest, self.today]
        if self.index.get(real) != row:
            self.fresh_index[real] = row

    # ---------------------------------------------------------------- lookups
    def get(self, key: str, display: str) -> FileReport | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        try:
            report = _decode(entry, display)
        except (KeyError, TypeError, ValueError, IndexError):
            self.entries.pop(key, None)  # a bad entry is a miss, and is rewritten
            return None
        if entry.get("t") != self.today:
            self.touched.add(key)
        return report

    def put(self, key: str, report: FileReport) -> None:
        if any(e.kind is ErrorKind.INTERNAL for e in report.errors):
            return  # a crash of offlint itself: report it again next time
        entry = _encode(report)
        entry["t"] = self.today
        self.fresh[key] = entry

    # ---------------------------------------------------------------- writing
    @property
    def dirty(self) -> bool:
        return bool(self.fresh or self.touched or self.fresh_index or self.touched_index)

    def save(self) -> bool:
        """Merge with what is on disk now and replace it atomically. False when it cannot."""
        if not self.dirty:
            return True
        import tempfile  # only a run that writes pays for it

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._mark_folder()
            merged, merged_index = self._read()  # another run may have written meanwhile
            merged.update({k: v for k, v in self.entries.items() if k not in merged})
            for key in self.touched:
                if key in merged and isinstance(merged[key], dict):
                    merged[key]["t"] = self.today
            merged.update(self.fresh)
            oldest = self.today - MAX_AGE_DAYS
            merged = {
                k: v for k, v in merged.items() if isinstance(v, dict) and isinstance(v.get("t"), int) and v["t"] >= oldest
            }
            merged_index.update({k: v for k, v in self.index.items() if k not in merged_index})
            for real in self.touched_index:
                row = merged_index.get(real)
                if isinstance(row, list) and len(row) == 6:
                    row[5] = self.today
            merged_index.update(self.fresh_index)
            merged_index = {
                k: v
                for k, v in merged_index.items()
                if isinstance(v, list) and len(v) == 6 and isinstance(v[5], int) and v[5] >= oldest
            }
            payload = json.dumps(
                {"engine": self.engine, "entries": merged, "files": merged_index}, separators=(",", ":")
            )
            fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".tmp", dir=self.folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(payload)
                os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is the project's
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            self._drop_stale_files()
        except OSError:
            return False
        self.entries, self.index = merged, merged_index
        self.fresh.clear()
        self.touched.clear()
        self.fresh_index.clear()
        self.touched_index.clear()
        return True

    def _mark_folder(self) -> None:
        for name, text in (
            (".gitignore", "# created by offlint\n*\n"),
            ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# offlint result cache\n"),
        ):
            marker = self.folder / name
            if not marker.exists():
                with contextlib.suppress(OSError):
                    marker.write_text(text, encoding="utf-8")

    def _drop_stale_files(self) -> None:
        """Results of other offlint versions: at most a day old ones are kept (another
        version may be running right now in a second checkout)."""
        for other in self.folder.glob("results-*.json"):
            if other == self.path:
                continue
            with contextlib.suppress(OSError):
                if time.time() - other.stat().st_mtime > 86400:
                    other.unlink()


def _encode(report: FileReport) -> dict[str, Any]:
    entry: dict[str, Any] = {"p": int(report.parsed)}
    if report.suppressed:
        entry["s"] = report.suppressed
    if report.diagnostics:
        entry["d"] = [
            [
                d.location.line,
                d.location.column,
                d.location.end_line,
                d.location.end_column,
                d.code,
                d.name,
                d.message,
                d.fix_title,
                d.fix_safety.value,
                d.source_line,
                d.note,
                d.confidence.value,
            ]
            for d in report.diagnostics
        ]
    if report.errors:
        entry["e"] = [[e.kind.value, e.message, e.line] for e in report.errors]
    if report.index:
        entry["i"] = [[q, c, r, [[t, inside] for t, inside in edges]] for q, c, r, edges in report.index]
    return entry


def _decode(entry: dict[str, Any], display: str) -> FileReport:
    report = FileReport(path=display, parsed=bool(entry["p"]), cached=True)
    report.suppressed = int(entry.get("s", 0))
    for row in entry.get("d", ()):
        line, column, end_line, end_column, code, name, message, fix_title, safety, source, note, confidence = row
        report.diagnostics.append(
            Diagnostic(
                path=display,
                location=Location(int(line), int(column), int(end_line), int(end_column)),
                code=str(code),
                name=str(name),
                message=str(message),
                fix_title=None if fix_title is None else str(fix_title),
                fix_safety=FixSafety(safety),
                source_line=str(source),
                note=None if note is None else str(note),
                confidence=Confidence(confidence),
            )
        )
    report.index = tuple(
        (str(q), str(c), str(r), tuple((str(t), bool(inside)) for t, inside in edges))
        for q, c, r, edges in entry.get("i", ())
    )
    for kind, message, line in entry.get("e", ()):
        report.errors.append(
            FileError(display, ErrorKind(kind), str(message), None if line is None else int(line))
        )
    return report
