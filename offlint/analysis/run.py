"""Run the analysis over many files: discovery, per-file settings, parallel analysis.

Parsing is the whole cost, so work is spread over processes only when there is enough of it,
and never nested: worker processes analyse files serially.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.config import Config, ConfigFinder, SelectionOverrides, resolve_selection
from offlint.diagnostics import ErrorKind, FileError, FileReport, RunReport
from offlint.discovery import Discovered, discover

# below this many bytes of candidate source a pool costs more than it saves
PARALLEL_THRESHOLD_BYTES = 2_000_000


@dataclass(frozen=True)
class CheckOptions:
    paths: tuple[Path, ...]
    overrides: SelectionOverrides = SelectionOverrides()
    config_file: Path | None = None
    jobs: int | None = None
    cwd: Path | None = None
    use_cache: bool = True


def settings_for(config: Config, overrides: SelectionOverrides, path: Path | None) -> FileSettings:
    catalogue = load_catalogue()
    codes = list(catalogue)
    defaults = [c for c, spec in catalogue.items() if spec.default_enabled]
    select = resolve_selection(config, overrides, codes, defaults, path)
    return FileSettings(select=select, capture_reachable=tuple(config.capture_reachable))


def read_file(found: Discovered) -> bytes | FileError:
    try:
        return found.path.read_bytes()
    except FileNotFoundError:
        return FileError(found.display, ErrorKind.MISSING, "vanished before it could be read")
    except IsADirectoryError:
        return FileError(found.display, ErrorKind.UNREADABLE, "is a directory")
    except OSError as exc:
        return FileError(found.display, ErrorKind.UNREADABLE, exc.strerror or str(exc))


def _analyse(job: tuple[bytes, str, FileSettings]) -> FileReport:
    data, display, settings = job
    return check_source(data, display, settings)


def check_paths(options: CheckOptions) -> RunReport:
    """Check every file below `options.paths`. Config errors raise ConfigError."""
    cwd = (options.cwd or Path.cwd()).resolve()
    finder = ConfigFinder(options.config_file, fallback_root=cwd)
    report = RunReport()
    started = time.perf_counter()
    files, errors = discover(list(options.paths), finder, cwd)
    report.errors.extend(errors)
    report.timings["discovery"] = time.perf_counter() - started

    jobs: list[tuple[bytes, str, FileSettings]] = []
    for found in files:
        settings = settings_for(finder.for_path(found.path), options.overrides, found.path)
        data = read_file(found)
        if isinstance(data, FileError):
            report.files.append(FileReport(path=found.display, errors=[data]))
            continue
        jobs.append((data, found.display, settings))
    report.files.extend(analyse_all(jobs, options.jobs))
    report.files.sort(key=lambda f: f.path)
    report.timings["total"] = time.perf_counter() - started
    return report


def analyse_all(jobs: Sequence[tuple[bytes, str, FileSettings]], workers: int | None) -> list[FileReport]:
    total = sum(len(data) for data, _, _ in jobs)
    count = workers if workers and workers > 0 else (os.cpu_count() or 1)
    if count <= 1 or len(jobs) < 2 or total < PARALLEL_THRESHOLD_BYTES:
        return [_analyse(job) for job in jobs]
    with ProcessPoolExecutor(max_workers=min(count, len(jobs))) as pool:
        return list(pool.map(_analyse, jobs, chunksize=max(1, len(jobs) // (count * 8))))
