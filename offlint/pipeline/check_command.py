"""`offlint check` end to end: options -> RunReport -> rendered output -> exit code."""

from __future__ import annotations

import sys
from pathlib import Path

from offlint.analysis.cache import CACHE_DIR_NAME
from offlint.analysis.engine import DecodeError, decode_source
from offlint.catalogue import default_selection
from offlint.config import ConfigError, ConfigFinder, SelectionOverrides, expand_selectors
from offlint.diagnostics import RunReport
from offlint.discovery import SKIPPED_DIRS
from offlint.pipeline.check import (
    below_floor_hidden,
    cache_folder,
    guarded_check,
    settings_for,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def cache_location(finder: ConfigFinder, paths: tuple[Path, ...], cache_dir: Path | None) -> Path:
    """The cache folder a check of `paths` uses (what `-v` and `--show-settings` print)."""
    return cache_folder(finder, paths, Path.cwd().resolve(), cache_dir)


def clean_caches(root: Path, cache_dir: Path | None = None) -> tuple[list[Path], list[tuple[Path, str]]]:
    """`offlint clean`: every `.offlint_cache` folder below `root` (the walk follows no link), and
    `cache_dir` when it lies below `root`; nothing outside `root`. Returns what was removed and
    what was left, with why (a folder holding files that are not offlint's is never emptied)."""
    import os

    from offlint.analysis.cache import clean_folder

    root = root.resolve()
    found: list[Path] = []
    for folder, subfolders, _ in os.walk(root):
        if CACHE_DIR_NAME in subfolders:
            found.append(Path(folder) / CACHE_DIR_NAME)
        # not into what is never a project's own (a virtual environment, .git): a big tree's walk
        subfolders[:] = [name for name in subfolders if name not in SKIPPED_DIRS]
    left: list[tuple[Path, str]] = []
    if cache_dir is not None and cache_dir.exists():
        chosen = cache_dir.resolve()
        if chosen == root or root not in chosen.parents:
            left.append((cache_dir, f"outside the project root {root}"))
        elif chosen not in found:
            found.append(chosen)
    removed: list[Path] = []
    for cache in found:
        if clean_folder(cache):
            removed.append(cache)
        else:
            left.append((cache, "a link, not this user's, or holding files that are not offlint's"))
    return removed, left


def exit_code_for(report: RunReport) -> int:
    if report.all_errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if report.diagnostics else EXIT_CLEAN


def check_stdin(
    stdin_filename: str | None,
    overrides: SelectionOverrides,
    config_file: Path | None,
    front_end: str = "skeleton",
) -> tuple[RunReport, dict[str, str]]:
    """Check the source on stdin; also return it (display name -> text) so the code frames show
    what was checked, not a file of the same name on disk."""
    display = stdin_filename or "-"
    cwd = Path.cwd()
    finder = ConfigFinder(config_file, fallback_root=cwd)
    where = Path(stdin_filename) if stdin_filename else cwd / "stdin.py"
    settings = settings_for(finder.for_path(where), overrides, where, front_end)
    data = sys.stdin.buffer.read()
    report = RunReport()
    report.files.append(below_floor_hidden(guarded_check(data, display, settings), settings))
    try:
        sources = {display: decode_source(data)}
    except DecodeError:
        sources = {}
    return report, sources


def validate_overrides(overrides: SelectionOverrides) -> None:
    """Unknown `--select/--extend-select/--ignore` selectors fail the run even with no files."""
    if overrides.select is not None and not overrides.select:
        # `--select ''` (an unset variable in a script) would run no rule and report success
        raise ConfigError("--select: an empty selection runs no rule (name rule codes, or ALL)")
    codes = list(default_selection())
    for option, selectors in (
        ("--select", overrides.select or ()),
        ("--extend-select", overrides.extend_select),
        ("--ignore", overrides.ignore),
    ):
        expand_selectors(selectors, codes, option)


def _timings_table(report: RunReport) -> str:
    """Where the time went: the run's stages (wall clock, main process), then the per-file
    stages summed over every file (CPU time spread over the worker processes)."""
    files = report.files
    cached = sum(1 for f in files if f.cached)
    parsed = sum(1 for f in files if f.parsed and not f.cached)
    settled = len(files) - cached - parsed
    lines = [
        f"timings: {len(files)} files: {cached} from cache ({report.unread} not even read),"
        f" {settled} settled by the prefilter, {parsed} parsed",
        "  run (wall clock)",
    ]
    run_stages = ("discovery", "cache", "read", "prefilter", "pool start", "analyse", "total")
    for stage in run_stages:
        if stage in report.timings:
            lines.append(f"    {stage:<26} {report.timings[stage] * 1000:10.1f} ms")
    for stage, seconds in report.timings.items():
        if stage not in run_stages:
            lines.append(f"    {stage:<26} {seconds * 1000:10.1f} ms")
    per_file: dict[str, float] = {}
    for file_report in files:
        for stage, seconds in file_report.timings.items():
            per_file[stage] = per_file.get(stage, 0.0) + seconds
    if per_file:
        lines.append("  per file (summed over files and workers)")
        order = ("decode", "prefilter", "import", "guard", "parse", "model")
        named = [s for s in order if s in per_file]
        rules = sorted(s for s in per_file if s.startswith("rule "))
        rest = sorted(s for s in per_file if s not in order and not s.startswith("rule "))
        for stage in named + rules + rest:
            lines.append(f"    {stage:<26} {per_file[stage] * 1000:10.1f} ms")
    return "\n".join(lines)
