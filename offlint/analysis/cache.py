"""`.offlint_cache/`: results of earlier runs, keyed on what a file's result depends on.

A file's result is a function of its bytes, the settings that apply to it (selection, configured
capture-reachable names) and the analysis itself (offlint's version, its source code, the rule
catalogue, libcst's version). The first two form each entry's key; the third names the cache
file, so a new offlint or an edited rule starts from an empty cache. Nothing is keyed on paths or
modification times: a result found under a content hash is right whatever the file is called.

Robustness: the cache is JSON (never pickle: a cache folder can come with a checked-out tree),
written to a temporary file and renamed into place, so readers see an old or a new file, never
half of one. A file or entry that does not read back as expected is ignored (a miss). Concurrent
runs merge: each writer re-reads what is on disk just before replacing it. Entries unused for
`MAX_AGE_DAYS` are dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any

from offlint import __version__
from offlint.diagnostics import Diagnostic, ErrorKind, FileError, FileReport, FixSafety, Location

CACHE_DIR_NAME = ".offlint_cache"
FORMAT = 1
MAX_AGE_DAYS = 30
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
    """Everything global a result depends on: versions, offlint's code, the rule catalogue."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (str(FORMAT), __version__, _libcst_version(), f"{sys.version_info[:2]}"):
        digest.update(part.encode() + b"\0")
    sources = sorted(_PACKAGE.rglob("*.py"))
    try:
        from offlint.catalogue import catalogue_dir

        sources += sorted(catalogue_dir().glob("*.toml"))
    except Exception:  # pragma: no cover - no catalogue: the run fails elsewhere
        pass
    for path in sources:
        try:
            digest.update(path.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        except OSError:
            digest.update(path.as_posix().encode() + b"\0?\0")
    return digest.hexdigest()


def content_key(data: bytes, settings_key: str) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest() + ":" + _settings_digest(settings_key)


@cache
def _settings_digest(settings_key: str) -> str:
    return hashlib.blake2b(settings_key.encode(), digest_size=8).hexdigest()


def _today() -> int:
    return int(time.time() // 86400)


class ResultCache:
    """One JSON file per engine key under `<root>/.offlint_cache/`."""

    def __init__(self, folder: Path, key: str | None = None) -> None:
        self.folder = folder
        self.engine = key or engine_key()
        self.path = folder / f"results-{self.engine[:24]}.json"
        self.entries: dict[str, dict[str, Any]] = {}
        self.fresh: dict[str, dict[str, Any]] = {}  # written this run
        self.touched: set[str] = set()
        self.hits = 0
        self.misses = 0
        self.today = _today()
        self.entries = self._read()

    @classmethod
    def at(cls, root: Path) -> ResultCache:
        return cls(root / CACHE_DIR_NAME)

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            raw = json.loads(self.path.read_bytes())
        except (OSError, ValueError, UnicodeDecodeError):
            return {}
        if not isinstance(raw, dict) or raw.get("engine") != self.engine:
            return {}
        entries = raw.get("entries")
        return entries if isinstance(entries, dict) else {}

    # ---------------------------------------------------------------- lookups
    def get(self, key: str, display: str) -> FileReport | None:
        entry = self.entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        try:
            report = _decode(entry, display)
        except (KeyError, TypeError, ValueError, IndexError):
            self.entries.pop(key, None)  # a bad entry is a miss, and is rewritten
            self.misses += 1
            return None
        self.hits += 1
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
        return bool(self.fresh or self.touched)

    def save(self) -> bool:
        """Merge with what is on disk now and replace it atomically. False when it cannot."""
        if not self.dirty:
            return True
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._mark_folder()
            merged = self._read()  # another run may have written meanwhile
            merged.update({k: v for k, v in self.entries.items() if k not in merged})
            for key in self.touched:
                if key in merged and isinstance(merged[key], dict):
                    merged[key]["t"] = self.today
            merged.update(self.fresh)
            oldest = self.today - MAX_AGE_DAYS
            merged = {
                k: v for k, v in merged.items() if isinstance(v, dict) and isinstance(v.get("t"), int) and v["t"] >= oldest
            }
            payload = json.dumps({"engine": self.engine, "entries": merged}, separators=(",", ":"))
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
        self.entries = merged
        self.fresh.clear()
        self.touched.clear()
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
            ]
            for d in report.diagnostics
        ]
    if report.errors:
        entry["e"] = [[e.kind.value, e.message, e.line] for e in report.errors]
    return entry


def _decode(entry: dict[str, Any], display: str) -> FileReport:
    report = FileReport(path=display, parsed=bool(entry["p"]), cached=True)
    report.suppressed = int(entry.get("s", 0))
    for row in entry.get("d", ()):
        line, column, end_line, end_column, code, name, message, fix_title, safety, source = row
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
            )
        )
    for kind, message, line in entry.get("e", ()):
        report.errors.append(
            FileError(display, ErrorKind(kind), str(message), None if line is None else int(line))
        )
    return report
