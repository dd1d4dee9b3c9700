"""Baselines for gradual adoption: `check --write-baseline FILE` records today's findings,
`check --baseline FILE` reports only findings that are not in it.

A finding is matched by its file (relative to the baseline's folder), its rule code and a hash
of its source line with whitespace collapsed - not by line number, so code added or removed
above a known finding keeps it matched, while a new finding of the same rule on another line is
reported. Identical entries are counted: a second copy of a baselined line is new.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from offlint.config import ConfigError
from offlint.diagnostics import Diagnostic, RunReport
from offlint.guarded_io import Refused, read_regular_text, write_new_file

FORMAT = "offlint-baseline/1"


class Key(NamedTuple):
    path: str  # posix, relative to the baseline file's folder
    code: str
    line_hash: str


def line_hash(source_line: str) -> str:
    """The hash of a finding's line: whitespace-insensitive, so reindenting keeps it."""
    return hashlib.sha256(" ".join(source_line.split()).encode("utf-8")).hexdigest()[:16]


def _relative(display: str, cwd: Path, folder: Path) -> str:
    absolute = os.path.normpath(os.path.join(cwd, display))
    relative = Path(os.path.relpath(absolute, folder)).as_posix()
    # a file name that is not UTF-8 (kept by Python as lone surrogates) is written with its
    # undecodable bytes as `\\xNN`: JSON in UTF-8 cannot hold them, and loading maps names alike
    return os.fsencode(relative).decode("utf-8", errors="backslashreplace")


def key_of(diagnostic: Diagnostic, cwd: Path, folder: Path) -> Key:
    return Key(_relative(diagnostic.path, cwd, folder), diagnostic.code, line_hash(diagnostic.source_line))


def write_baseline(
    path: Path, diagnostics: Iterable[Diagnostic], cwd: Path, roots: Iterable[str] | None = None
) -> int:
    """Write every diagnostic to `path`; the number written. Refused (one line) when it cannot be
    written, or when `path` is a link leading outside `roots`."""
    folder = path.resolve().parent
    entries = sorted(
        (
            {
                **key_of(d, cwd, folder)._asdict(),
                # for the reader only: matching ignores them
                "line": d.location.line,
                "message": d.message,
            }
            for d in diagnostics
        ),
        key=lambda e: (e["path"], e["code"], e["line"], e["line_hash"]),
    )
    document = {"format": FORMAT, "findings": entries}
    # atomic: an error (a full disk, a refused link) leaves no empty or half baseline behind
    write_new_file(path, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), roots)
    return len(entries)


class Baseline:
    def __init__(self, path: Path, entries: Counter[Key]) -> None:
        self.path = path
        self.folder = path.resolve().parent
        self.entries = entries

    @classmethod
    def load(cls, path: Path) -> Baseline:
        """Read a baseline; a missing, unreadable or malformed file is a ConfigError (exit 2)."""
        try:
            document = json.loads(read_regular_text(path))
        except Refused as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                raise ConfigError(f"{path}: baseline not found (write one with --write-baseline {path})") from None
            raise ConfigError(f"{path}: cannot read baseline: {exc}") from None
        except (ValueError, RecursionError):
            raise ConfigError(f"{path}: not a baseline (invalid JSON)") from None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ConfigError(f"{path}: not an offlint baseline (expected \"format\": \"{FORMAT}\")")
        findings = document.get("findings")
        entries: Counter[Key] = Counter()
        if not isinstance(findings, list):
            raise ConfigError(f"{path}: baseline `findings` must be a list")
        for index, item in enumerate(findings):
            fields = [item.get(name) if isinstance(item, dict) else None for name in Key._fields]
            strings = [value for value in fields if isinstance(value, str)]
            if len(strings) != len(Key._fields):
                raise ConfigError(f"{path}: baseline finding {index + 1} needs path, code and line_hash strings")
            entries[Key(*strings)] += 1
        return cls(path, entries)

    def filter(self, report: RunReport, cwd: Path) -> int:
        """Drop the report's diagnostics that the baseline holds; how many were dropped."""
        left = Counter(self.entries)
        matched = 0
        for file_report in report.files:
            kept: list[Diagnostic] = []
            for diagnostic in file_report.diagnostics:
                key = key_of(diagnostic, cwd, self.folder)
                if left[key] > 0:
                    left[key] -= 1
                    matched += 1
                else:
                    kept.append(diagnostic)
            file_report.diagnostics = kept
        return matched
