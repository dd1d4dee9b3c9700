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

Security: the cache folder can be planted (a shared tree, another user's link). Every access goes
through a descriptor of the folder opened without following links, and each name in it is opened
relative to that descriptor, again without following links (no check-then-use race). A cache
folder that is a link, not a folder, or not this user's is not used at all (the run goes on
uncached); only regular files of this user, of at most MAX_FILE_BYTES, are read (a FIFO or a
link to `/dev/zero` is never opened for reading); markers are created only where no entry of that
name exists; and the only files ever deleted are this user's regular files named as offlint names
its own (`results-<24 hex>.json`, `.results-*.tmp`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
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
    Fix,
    FixSafety,
    Location,
    TextEdit,
)

try:  # blake2b without loading OpenSSL (hashlib's import costs a warm run ~2 ms more)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without the builtin module
    from hashlib import blake2b

CACHE_DIR_NAME = ".offlint_cache"
FORMAT = 6
MAX_AGE_DAYS = 30
RACY_SECONDS = 2  # coarser than any timestamp tick of a local filesystem (FAT's is 2 s)
MAX_FILE_BYTES = 512 * 1024 * 1024  # a results file larger than this is not ours: ignored
# results, and the semantic core's answers (`core-`: the tree's reach and each file's slice facts;
# `lowered-`: lowered files by content), one of each per engine key
_RESULTS_NAME = re.compile(r"^(?:results|core|lowered)-[0-9a-f]{24}\.json$")
_TEMP_NAME = re.compile(r"^\.results-[0-9a-z_]+\.tmp$")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
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
        # why the last save failed to write (a full disk, a read-only file system), for one warning
        self.write_error: str | None = None
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
        folder = _open_folder(self.folder)
        if folder is None:
            return {}, {}
        try:
            data = _read_own_file(folder, self.path.name)
        finally:
            _close_folder(folder)
        return _parse(data, self.engine)

    def _read_in(self, folder: _Folder) -> tuple[dict[str, dict[str, Any]], dict[str, list[Any]]]:
        return _parse(_read_own_file(folder, self.path.name), self.engine)

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
        """Merge with what is on disk now and replace it atomically. False when it cannot (or
        must not: the cache folder is a link, or not this user's)."""
        if not self.dirty:
            return True
        try:
            os.mkdir(self.folder, 0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            self.write_error = exc.strerror or str(exc)
            return False
        folder = _open_folder(self.folder)
        if folder is None:
            return False  # a link, not a folder, not this user's: not used, by design (no warning)
        try:
            self._mark_folder(folder)
            merged, merged_index = self._read_in(folder)  # another run may have written meanwhile
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
            _replace_file(folder, self.path.name, payload.encode("utf-8"))
            self._drop_stale_files(folder)
        except OSError as exc:
            self.write_error = exc.strerror or str(exc)
            return False
        finally:
            _close_folder(folder)
        self.entries, self.index = merged, merged_index
        self.fresh.clear()
        self.touched.clear()
        self.fresh_index.clear()
        self.touched_index.clear()
        return True

    def _mark_folder(self, folder: _Folder) -> None:
        for name, text in (
            (".gitignore", "# created by offlint\n*\n"),
            ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# offlint result cache\n"),
        ):
            # O_EXCL: an entry already there, even a dangling link, is left as it is
            with contextlib.suppress(OSError):
                fd = folder.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)

    def _drop_stale_files(self, folder: _Folder) -> None:
        """Results of other offlint versions: at most a day old ones are kept (another
        version may be running right now in a second checkout); temporary files of runs killed
        mid-write, after an hour. Only our own names, only this user's regular files."""
        now = time.time()
        for name in folder.names():
            if name == self.path.name:
                continue
            if _RESULTS_NAME.match(name):
                age = 86400
            elif _TEMP_NAME.match(name):
                age = 3600
            else:
                continue
            with contextlib.suppress(OSError):
                info = folder.lstat(name)
                if _own_regular(info) and now - info.st_mtime > age:
                    folder.unlink(name)


class _Folder:
    """The cache folder, through a descriptor opened without following links where the platform
    has them (every name below is then resolved against it), else through its path."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    def _at(self, name: str) -> str:
        return name if self.fd is not None else str(self.path / name)

    def open(self, name: str, flags: int, mode: int = 0o644) -> int:
        return os.open(self._at(name), flags, mode, dir_fd=self.fd)

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(self._at(name), dir_fd=self.fd, follow_symlinks=False)

    def unlink(self, name: str) -> None:
        os.unlink(self._at(name), dir_fd=self.fd)

    def rename(self, source: str, target: str) -> None:
        os.replace(self._at(source), self._at(target), src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def names(self) -> list[str]:
        with os.scandir(self.fd if self.fd is not None else self.path) as listing:
            return [entry.name for entry in listing]


def clean_folder(path: Path) -> bool:
    """`offlint clean`: remove a cache folder, and True when it is gone. Only a folder of this
    user's (never through a link) that holds nothing but offlint's own files is removed: a
    `--cache-dir` pointed at the wrong folder deletes nothing."""
    folder = _open_folder(path)
    if folder is None:
        return False
    try:
        names = folder.names()
        ours = {".gitignore", "CACHEDIR.TAG"}
        if not all(name in ours or _RESULTS_NAME.match(name) or _TEMP_NAME.match(name) for name in names):
            return False
        for name in names:
            if _own_regular(folder.lstat(name)):
                folder.unlink(name)
    except OSError:
        return False
    finally:
        _close_folder(folder)
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def _own_regular(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and (not hasattr(os, "geteuid") or info.st_uid == os.geteuid())


def _open_folder(path: Path, *, create: bool = False) -> _Folder | None:
    """The cache folder, or None when it is missing (and not to be created), a link, not a
    folder, or not this user's."""
    if create:
        with contextlib.suppress(FileExistsError, OSError):
            os.mkdir(path, 0o755)
    if os.open not in os.supports_dir_fd or not _NOFOLLOW or not _DIRECTORY:
        try:  # pragma: no cover - no descriptor-relative calls here (Windows): check, then use
            info = os.lstat(path)
        except OSError:
            return None
        return _Folder(path, None) if stat.S_ISDIR(info.st_mode) else None
    try:
        fd = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW)
    except OSError:
        return None  # missing, a link (ELOOP), or not a folder
    info = os.fstat(fd)
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        os.close(fd)
        return None
    return _Folder(path, fd)


def _close_folder(folder: _Folder) -> None:
    if folder.fd is not None:
        os.close(folder.fd)


def _read_own_file(folder: _Folder, name: str) -> bytes | None:
    """The bytes of `name` if it is this user's regular file of at most MAX_FILE_BYTES."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused by its type)
        fd = folder.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(handle.fileno())
            if not _own_regular(info) or info.st_size > MAX_FILE_BYTES:
                return None
            return handle.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None


def _parse(data: bytes | None, engine: str) -> tuple[dict[str, dict[str, Any]], dict[str, list[Any]]]:
    if data is None or len(data) > MAX_FILE_BYTES:
        return {}, {}
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}, {}
    if not isinstance(raw, dict) or raw.get("engine") != engine:
        return {}, {}
    entries = raw.get("entries")
    index = raw.get("files")
    return (entries if isinstance(entries, dict) else {}), (index if isinstance(index, dict) else {})


def _replace_file(folder: _Folder, name: str, data: bytes) -> None:
    """Write `data` to a fresh temporary file (O_EXCL, no links) and rename it onto `name`."""
    import secrets  # only a run that writes pays for it

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    for _attempt in range(100):
        tmp = f".results-{secrets.token_hex(8)}.tmp"
        try:
            fd = folder.open(tmp, flags, 0o644)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError("no free temporary name in the cache folder")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        folder.rename(tmp, name)
    except BaseException:
        with contextlib.suppress(OSError):
            folder.unlink(tmp)
        raise


def _encode(report: FileReport) -> dict[str, Any]:
    entry: dict[str, Any] = {"p": int(report.parsed)}
    if report.suppressed:
        entry["s"] = report.suppressed
    if report.fixes_confirmed_at is not None:
        entry["f"] = report.fixes_confirmed_at.value
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
                _encode_fix(d.fix),
                *([d.cell] if d.cell is not None or d.not_fixed is not None else []),
                *([d.not_fixed] if d.not_fixed is not None else []),
            ]
            for d in report.diagnostics
        ]
    if report.errors:
        entry["e"] = [[e.kind.value, e.message, e.line, e.cell, e.column] for e in report.errors]
    if report.index:
        entry["i"] = [
            [q, c, r, [[t, inside, [list(pair) for pair in handed]] for t, inside, handed in edges]]
            for q, c, r, edges in report.index
        ]
    return entry


def _encode_fix(fix: Fix | None) -> list[Any] | None:
    if fix is None:
        return None
    return [
        fix.title,
        fix.safety.value,
        [[e.line, e.column, e.end_line, e.end_column, e.content] for e in fix.edits],
        fix.fixer,
        list(fix.notes),
    ]


def _decode_fix(raw: Any) -> Fix | None:
    if raw is None:
        return None
    title, safety, edits = raw[:3]
    return Fix(
        str(title),
        FixSafety(safety),
        tuple(TextEdit(int(a), int(b), int(c), int(d), str(text)) for a, b, c, d, text in edits),
        str(raw[3]) if len(raw) > 3 else "",
        tuple(str(n) for n in raw[4]) if len(raw) > 4 else (),
    )


def _decode(entry: dict[str, Any], display: str) -> FileReport:
    report = FileReport(path=display, parsed=bool(entry["p"]), cached=True)
    report.suppressed = int(entry.get("s", 0))
    if "f" in entry:
        report.fixes_confirmed_at = Confidence(entry["f"])
    for row in entry.get("d", ()):
        line, column, end_line, end_column, code, name, message, fix_title, safety, source, note, confidence, fix = row[:13]
        cell = row[13] if len(row) > 13 else None  # a notebook's cell
        not_fixed = row[14] if len(row) > 14 else None
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
                fix=_decode_fix(fix),
                cell=None if cell is None else int(cell),
                not_fixed=None if not_fixed is None else str(not_fixed),
            )
        )
    report.index = tuple(
        (
            str(q),
            str(c),
            str(r),
            tuple(
                (str(t), bool(inside), tuple((str(p), str(k)) for p, k in handed)) for t, inside, handed in edges
            ),
        )
        for q, c, r, edges in entry.get("i", ())
    )
    for kind, message, line, cell, column in entry.get("e", ()):
        report.errors.append(
            FileError(
                display,
                ErrorKind(kind),
                str(message),
                None if line is None else int(line),
                None if cell is None else int(cell),
                None if column is None else int(column),
            )
        )
    return report


def read_blob(folder_path: Path, name: str, engine: str | None = None) -> dict[str, Any] | None:
    """A JSON object offlint wrote under the cache folder (`core-*.json`, `lowered-*.json`) for
    this engine key, through the same guards as the results: None when missing, not ours, or
    written by another offlint."""
    folder = _open_folder(folder_path)
    if folder is None:
        return None
    try:
        data = _read_own_file(folder, name)
    finally:
        _close_folder(folder)
    if data is None:
        return None
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("engine") != (engine or engine_key()):
        return None
    return raw


def write_blob(folder_path: Path, name: str, value: dict[str, Any], engine: str | None = None) -> bool:
    """Replace `name` in an existing cache folder of this user's (never through a link)."""
    if not _RESULTS_NAME.match(name):
        raise ValueError(f"not a cache file name of offlint's: {name}")
    folder = _open_folder(folder_path, create=True)
    if folder is None:
        return False
    try:
        payload = json.dumps({**value, "engine": engine or engine_key()}, separators=(",", ":"))
        _replace_file(folder, name, payload.encode("utf-8"))
    except (OSError, ValueError, TypeError, RecursionError):
        return False
    finally:
        _close_folder(folder)
    return True
