"""The check pipeline over many files: discovery, per-file settings, cache, prefilter, analysis.

Parsing with libcst is the whole cost, so the work is staged and only what is left reaches it:

1. discovery, then for each file: a result cached under the same bytes and settings is taken
   as is (`cache.py`), found through the stat index without reading the file when its size,
   times and inode are those it had when indexed; otherwise its bytes are read and hashed;
2. the prefilter (`prefilter.py`, microseconds per file) drops every file that cannot hold a
   finding of the selected rules; this runs in the main process, which never imports libcst;
3. what is left is parsed and analysed, in a process pool when there is enough of it: the pool
   starts (and its workers import libcst) as soon as the first candidate of a large tree is
   seen, so that cost overlaps the main process's reading; candidates go largest first and
   results stream back as they complete. No pool for a single file or little work, with `-j1`,
   nor under pre-commit (`PRE_COMMIT` set), which runs its own processes in parallel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from offlint.analysis.cache import CACHE_DIR_NAME, ResultCache, content_digest, result_key
from offlint.analysis.engine import (
    DecodeError,
    FileSettings,
    check_source,
    decode_source,
)
from offlint.catalogue import default_selection
from offlint.config import Config, ConfigFinder, SelectionOverrides, resolve_selection
from offlint.diagnostics import (
    DEFAULT_MIN_CONFIDENCE,
    Confidence,
    Diagnostic,
    ErrorKind,
    FileError,
    FileReport,
    RunReport,
)
from offlint.discovery import Discovered, discover
from offlint.notebooks import NotebookError, is_notebook, notebook_error, read_notebook
from offlint.pipeline.tree_reach import TreeFacts, merged, tree_seeds

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from offlint.analysis.callgraph import Seed
    from offlint.analysis.model import ModuleModel

# below this many bytes of candidate source a pool costs more than it saves (~0.3 s of parsing)
PARALLEL_THRESHOLD_BYTES = 250_000
# a tree this large starts the pool at its first candidate, before all files are read
EARLY_POOL_MIN_FILES = 64

Job = tuple[bytes, str, FileSettings]


@dataclass(frozen=True)
class CheckOptions:
    paths: tuple[Path, ...]
    overrides: SelectionOverrides = SelectionOverrides()  # noqa: RUF009 - frozen, shared safely
    config_file: Path | None = None
    jobs: int | None = None
    cwd: Path | None = None
    use_cache: bool = True
    front_end: str = "skeleton"  # FileSettings.front_end: "skeleton", or "libcst" (--parser libcst)
    cache_dir: Path | None = None  # --cache-dir; None: .offlint_cache in the project root
    # when given, filled with the settings each file's reported result was analysed with (display
    # -> settings, cross-module seeds included): `fix` fixes with what `check` knew
    analysed_with: dict[str, FileSettings] | None = None
    # told (phase, files done, files in all) as the run goes: the CLI's progress display
    progress: Callable[[str, int, int], None] | None = field(default=None, compare=False)
    # the text of unsaved editor buffers (`offlint server`), by resolved path: checked in place of
    # what is on disk, as if saved (the cache is content-addressed, so it serves them too)
    overlays: Mapping[str, bytes] = dataclasses.field(default_factory=dict)
    # when given, filled with each checked file's resolved path (display -> real)
    real_paths: dict[str, str] | None = None


def _no_progress(phase: str, done: int, total: int) -> None:
    return None


def settings_for(
    config: Config, overrides: SelectionOverrides, path: Path | None, front_end: str = "skeleton"
) -> FileSettings:
    selection = default_selection()
    codes = list(selection)
    defaults = [code for code, enabled in selection.items() if enabled]
    select = resolve_selection(config, overrides, codes, defaults, path)
    floor = overrides.min_confidence or config.min_confidence
    from offlint.fixing.capture_modes import CAPTURE_MODES  # data, importing nothing

    compile_safe = config.fix.get("compile-safe", "auto")  # validated by config.py
    return FileSettings(
        select=select,
        capture_reachable=tuple(config.capture_reachable),
        front_end=front_end,
        min_confidence=Confidence(floor) if floor else DEFAULT_MIN_CONFIDENCE,
        compile_safe=None if compile_safe == "auto" else bool(compile_safe),
        fix_strategy=str(config.fix.get("strategy", "auto")),
        capture_modes=config.capture_modes or CAPTURE_MODES,
    )


class _SettingsMemo:
    """Settings depend on the path only through the config and its per-file ignores."""

    def __init__(self, finder: ConfigFinder, overrides: SelectionOverrides, front_end: str) -> None:
        self.finder = finder
        self.overrides = overrides
        self.front_end = front_end
        self._memo: dict[tuple[int, tuple[str, ...]], tuple[Config, FileSettings]] = {}
        # what the semantic core reaches in each file, and the receivers it types (tree_reach.py)
        self.tree = TreeFacts()

    def __call__(self, found_file: Discovered) -> FileSettings:
        config = self.finder.for_real_file(found_file.real)
        key = (id(config), config.ignores_for(found_file.path) if config.per_file_ignores else ())
        found = self._memo.get(key)
        if found is None:
            found = (config, settings_for(config, self.overrides, found_file.path, self.front_end))
            self._memo[key] = found  # holding config keeps its id unique
        seeds = self.tree.seeds.get(found_file.display)
        hints = self.tree.hints.get(found_file.display, ())
        if seeds or hints:
            return dataclasses.replace(found[1], seeds=merged(found[1].seeds, seeds or ()), hints=hints)
        return found[1]


def read_file(found: Discovered) -> bytes | FileError:
    read = read_file_and_stat(found)
    return read if isinstance(read, FileError) else read[0]


def read_file_and_stat(found: Discovered) -> tuple[bytes, os.stat_result] | FileError:
    """The file's bytes, and its stat taken before they were read (a later change shows). Read
    through the guarded path: a FIFO named `*.py` must not hang the run, a link to /dev/zero
    must not read for ever; only regular files up to MAX_SOURCE_BYTES are read."""
    from offlint.guarded_io import MAX_SOURCE_BYTES, Refused, TooLarge, read_regular

    try:
        return read_regular(found.walked, MAX_SOURCE_BYTES)
    except Refused as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return FileError(found.display, ErrorKind.MISSING, "vanished before it could be read")
        return FileError(found.display, ErrorKind.TOO_LARGE if isinstance(exc, TooLarge) else ErrorKind.UNREADABLE, str(exc))


def serial_only(jobs: int | None) -> bool:
    """No pool: `-j1`, or no `-j` under pre-commit (it already runs hooks in parallel)."""
    if jobs is not None:
        return jobs <= 1
    return bool(os.environ.get("PRE_COMMIT")) or (os.cpu_count() or 1) <= 1


def worker_count(jobs: int | None, tasks: int) -> int:
    """`-j`, capped at the CPUs this process may use (more workers only compete for them and
    multiply memory), and at the number of tasks."""
    from offlint.pipeline.processes import usable_cpus

    cpus = usable_cpus()
    count = min(jobs, cpus) if jobs and jobs > 0 else cpus
    return max(1, min(count, tasks))


def cache_folder(finder: ConfigFinder, paths: Sequence[Path], cwd: Path, cache_dir: Path | None = None) -> Path:
    """`--cache-dir` (or OFFLINT_CACHE_DIR), else `.offlint_cache` in the project root of the
    first path checked (`ConfigFinder.project_root`), not in the working directory: the same tree
    checked from another folder finds its cache warm."""
    if cache_dir is not None:
        return cache_dir
    return finder.project_root(paths[0] if paths else cwd) / CACHE_DIR_NAME


def check_paths(options: CheckOptions) -> RunReport:
    """Check every file below `options.paths`. Config errors raise ConfigError. A SIGINT,
    SIGTERM or SIGHUP ends the workers with the run (`processes.py`)."""
    from offlint.pipeline.processes import ending_with_the_run

    with ending_with_the_run():
        return _check_paths(options)


def _check_paths(options: CheckOptions) -> RunReport:
    cwd = (options.cwd or Path.cwd()).resolve()
    finder = ConfigFinder(options.config_file, fallback_root=cwd)
    report = RunReport()
    clock = _Clock(report.timings)
    started = time.perf_counter()
    files, errors = discover(list(options.paths), finder, cwd, report.excluded)
    report.errors.extend(errors)
    clock.add("discovery", time.perf_counter() - started)

    results_cache: ResultCache | None = None
    if options.use_cache:
        with clock("cache"):
            results_cache = ResultCache(cache_folder(finder, options.paths, cwd, options.cache_dir))
    settings_of = _SettingsMemo(finder, options.overrides, options.front_end)
    already_read: dict[str, tuple[bytes, os.stat_result | None]] = {}
    if os.environ.get("OFFLINT_SEMANTIC_CORE", "1") != "0":
        with clock("semantic core"):
            # unsaved editor buffers are what the core reads too; its answer for them is not kept
            # (the files' stats do not change as a buffer does)
            folder = results_cache.folder if results_cache is not None and not options.overlays else None
            overlays = options.overlays

            def read_for_core(found: Discovered) -> tuple[bytes, os.stat_result | None] | FileError:
                held = overlays.get(found.real)
                return (held, None) if held is not None else read_file_and_stat(found)

            try:
                settings_of.tree = tree_seeds(files, folder, already_read, read_for_core)
            except Exception as exc:  # any failure of the core leaves each file its own reach
                # the per-file analysis still runs, with its own reach: the run goes on
                report.timings[f"semantic core stopped: {type(exc).__name__}"] = 0.0
    serial = serial_only(options.jobs)
    pool: _Pool | None = None
    candidates: list[tuple[Job, str | None]] = []  # (job, cache key)

    now = time.perf_counter
    progress = options.progress or _no_progress
    total_files = len(files)
    for position, found in enumerate(files):
        if position % 64 == 0:
            progress("reading", position, total_files)
        # stages are timed by hand, not with `clock(...)`: a context manager per file and stage
        # cost more than the stage itself on a warm run
        settings = settings_of(found)
        overlay = options.overlays.get(found.real)
        if results_cache is not None and overlay is None:
            at = now()
            unread = _cached_unread(results_cache, found, settings)
            clock.add("cache", now() - at)
            if unread is not None:
                report.files.append(below_floor_hidden(unread, settings))
                report.unread += 1
                continue
        at = now()
        read: tuple[bytes, os.stat_result | None] | FileError
        if overlay is not None:
            read = (overlay, None)
        else:
            read = already_read.pop(found.display, None) or read_file_and_stat(found)
        clock.add("read", now() - at)
        if isinstance(read, FileError):
            report.files.append(FileReport(path=found.display, errors=[read]))
            continue
        data, info = read
        key = None
        if results_cache is not None:
            at = now()
            digest = content_digest(data)
            if info is not None:  # an editor's buffer is not what the stat index describes
                results_cache.remember(found.real, info, digest)
            key = result_key(digest, settings.key())
            hit = usable(results_cache.get(key, found.display), settings)
            clock.add("cache", now() - at)
            if hit is not None:
                report.files.append(below_floor_hidden(hit, settings))
                continue
        at = now()
        early = _prefilter(data, found.display, settings)
        clock.add("prefilter", now() - at)
        if early is not None:
            report.files.append(early)
            if results_cache is not None and key is not None:
                results_cache.put(key, early)
            continue
        candidates.append(((data, found.display, settings), key))
        if pool is None and not serial and len(files) >= EARLY_POOL_MIN_FILES:
            with clock("pool start"):
                pool = _Pool(worker_count(options.jobs, len(files)))

    with clock("analyse"):
        total = sum(len(job[0]) for job, _ in candidates)
        if pool is None and not serial and len(candidates) >= 2 and total >= PARALLEL_THRESHOLD_BYTES:
            with clock("pool start"):
                pool = _Pool(worker_count(options.jobs, len(candidates)))
        keys = {job[1]: key for job, key in candidates}
        floors = {job[1]: job[2] for job, _ in candidates}
        jobs = [job for job, _ in candidates]
        stream = pool.run(jobs) if pool is not None else (_analyse(job) for job in jobs)
        settled = total_files - len(jobs)
        progress("analysing", settled, total_files)
        try:
            for file_report in stream:
                settled += 1
                progress("analysing", settled, total_files)
                key = keys.get(file_report.path)
                if results_cache is not None and key is not None:
                    results_cache.put(key, file_report)  # every finding: the floor is the report's
                report.files.append(below_floor_hidden(file_report, floors[file_report.path]))
            progress("following calls across modules", total_files, total_files)
            with clock("call graph"):
                reanalysed = _follow_calls_across_modules(
                    report, files, settings_of, results_cache, pool, options.overlays
                )
        finally:
            if pool is not None:
                pool.close()
    if results_cache is not None:
        with clock("cache"):
            if not results_cache.save() and results_cache.write_error is not None:
                # the results stand (and the exit code with them); only the next run is slower
                sys.stderr.write(f"offlint: warning: cache not written: {results_cache.write_error}\n")
    report.files.sort(key=lambda f: f.path)
    report.timings["total"] = time.perf_counter() - started
    if options.analysed_with is not None:
        options.analysed_with.update((found.display, settings_of(found)) for found in files)
        options.analysed_with.update(reanalysed)
    if options.real_paths is not None:
        options.real_paths.update((found.display, found.real) for found in files)
    return report


# a chain of calls crossing this many modules from a capture region is followed; longer ones stop
CALL_GRAPH_ROUNDS = 6


def _follow_calls_across_modules(
    report: RunReport,
    files: Sequence[Discovered],
    settings_of: _SettingsMemo,
    results_cache: ResultCache | None,
    pool: _Pool | None,
    overlays: Mapping[str, bytes],
) -> dict[str, FileSettings]:
    """Re-analyse the files whose functions other modules reach from a capture region
    (`callgraph.py`), round by round, until no new function is reached; then, when the tree
    captures in segments, the files that leave event forks to a later join. Returns the settings
    each re-analysed file was last analysed with."""
    if not any(f.index for f in report.files):
        return {}
    from offlint.analysis.callgraph import (
        ModuleNames,
        cross_module_seeds,
        files_to_recheck_for_segments,
    )

    names = ModuleNames()
    modules: dict[str, str] = {}
    module_of: dict[str, tuple[str, bool]] = {}
    for found in files:
        module = names.of(found.real)
        if module is not None:
            modules.setdefault(module, found.display)
            module_of[found.display] = (module, os.path.basename(found.real) == "__init__.py")
    again = _Reanalysis(report, files, settings_of, results_cache, pool, overlays)
    for _ in range(CALL_GRAPH_ROUNDS):
        indexes = {
            f.path: (*module_of[f.path], f.index) for f in report.files if f.index and f.path in module_of
        }
        changed = []
        for key, seeds in cross_module_seeds(indexes, modules).items():
            known = again.seeded.setdefault(key, {})
            fresh = [seed for seed in seeds if seed.qualname not in known]
            if fresh and key in again.position:
                known.update((seed.qualname, seed) for seed in fresh)
                changed.append(key)
        if not changed:
            break
        again.run(changed)
    segmented = files_to_recheck_for_segments({f.path: f.index for f in report.files if f.index})
    if segmented:
        again.segmented = True
        again.run(segmented)
    return again.analysed_with


class _Reanalysis:
    """Analyses files of a run again with what the whole tree taught: the functions other modules
    reach (`seeded`), and whether the tree captures in segments."""

    def __init__(
        self,
        report: RunReport,
        files: Sequence[Discovered],
        settings_of: _SettingsMemo,
        results_cache: ResultCache | None,
        pool: _Pool | None,
        overlays: Mapping[str, bytes],
    ) -> None:
        self.report = report
        self.overlays = overlays
        self.by_display = {found.display: found for found in files}
        self.position = {f.path: i for i, f in enumerate(report.files)}
        self.settings_of = settings_of
        self.results_cache = results_cache
        self.pool = pool
        self.seeded: dict[str, dict[str, Seed]] = {}
        self.segmented = False
        self.analysed_with: dict[str, FileSettings] = {}

    def run(self, changed: Sequence[str]) -> None:
        jobs: list[Job] = []
        keys: dict[str, str | None] = {}
        floors: dict[str, FileSettings] = {}
        for key in changed:
            found = self.by_display[key]
            settings = dataclasses.replace(
                self.settings_of(found),
                seeds=merged(tuple(self.seeded.get(key, {}).values()), self.settings_of(found).seeds),
                segmented_capture=self.segmented,
            )
            floors[key] = settings
            self.analysed_with[key] = settings
            done = _cached_or_job(found, settings, self.results_cache, self.overlays.get(found.real))
            if isinstance(done, FileReport):
                self.report.files[self.position[key]] = below_floor_hidden(done, settings)
            else:
                jobs.append(done[0])
                keys[key] = done[1]
        # the pool's workers are still up: re-analysed files are parsed in parallel too
        pool = self.pool
        stream = pool.run(jobs) if pool is not None and len(jobs) > 1 else (_analyse(job) for job in jobs)
        for file_report in stream:
            cache_key = keys.get(file_report.path)
            if self.results_cache is not None and cache_key is not None:
                self.results_cache.put(cache_key, file_report)
            self.report.files[self.position[file_report.path]] = below_floor_hidden(
                file_report, floors[file_report.path]
            )


def _cached_or_job(
    found: Discovered, settings: FileSettings, results_cache: ResultCache | None, overlay: bytes | None = None
) -> FileReport | tuple[Job, str | None]:
    """One file's report from the cache when it holds one for these bytes and settings, else the
    job that analyses it (and the cache key its result goes under). `overlay`: an editor's
    unsaved text of the file, checked instead of what is on disk."""
    if results_cache is not None and overlay is None:
        unread = _cached_unread(results_cache, found, settings)
        if unread is not None:
            return unread
    read = read_file_and_stat(found) if overlay is None else (overlay, None)
    if isinstance(read, FileError):
        return FileReport(path=found.display, errors=[read])
    data, info = read
    key = None
    if results_cache is not None:
        digest = content_digest(data)
        if info is not None:
            results_cache.remember(found.real, info, digest)
        key = result_key(digest, settings.key())
        hit = usable(results_cache.get(key, found.display), settings)
        if hit is not None:
            return hit
    return (data, found.display, settings), key


def usable(hit: FileReport | None, settings: FileSettings) -> FileReport | None:
    """A cached result, unless this run's floor shows findings whose fixes it left unconfirmed."""
    if hit is None or hit.fixes_confirmed_at is None:
        return hit
    return hit if settings.min_confidence.at_least(hit.fixes_confirmed_at) else None


def below_floor_hidden(file_report: FileReport, settings: FileSettings) -> FileReport:
    """The report without the findings under the confidence floor (`--min-confidence`), which
    it counts as hidden."""
    floor = settings.min_confidence
    kept = [d for d in file_report.diagnostics if d.confidence.at_least(floor)]
    if len(kept) != len(file_report.diagnostics):
        file_report.hidden += len(file_report.diagnostics) - len(kept)
        file_report.diagnostics = kept
    return file_report


def _cached_unread(results_cache: ResultCache, found: Discovered, settings: FileSettings) -> FileReport | None:
    """The cached result of a file the stat index knows unchanged: no read, no hash."""
    try:
        info = os.stat(found.walked)
    except OSError:
        return None  # reading it reports why
    digest = results_cache.known_digest(found.real, info)
    return None if digest is None else usable(results_cache.get(result_key(digest, settings.key()), found.display), settings)


def _prefilter(data: bytes, display: str, settings: FileSettings) -> FileReport | None:
    """The report of a file settled without a worker: one that is not text, a notebook that is
    not JSON. Every other file goes to a worker, where the prefilter settles those no rule can
    fire in after CPython's compile has said they are Python (a syntax error is an error of the
    run in every file, as in ruff)."""
    if is_notebook(display):
        try:
            read_notebook(data)
        except NotebookError as exc:
            return FileReport(path=display, errors=[notebook_error(display, exc)])
        return None
    try:
        decode_source(data)
    except DecodeError as exc:
        return FileReport(path=display, errors=[FileError(display, ErrorKind.UNDECODABLE, str(exc))])
    return None


def _analyse(job: Job) -> FileReport:
    data, display, settings = job
    return guarded_check(data, display, settings)


class _FixAvailability:
    """The fixing layer's `FixConfirmer`, imported on first use: a file the prefilter drops never
    pays for libcst and the fixers."""

    def may_plan(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> bool:
        from offlint.fixing.availability import FIX_AVAILABILITY

        return FIX_AVAILABILITY.may_plan(model, settings, diagnostics)

    def confirm(self, model: ModuleModel, settings: FileSettings, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        from offlint.fixing.availability import FIX_AVAILABILITY

        return FIX_AVAILABILITY.confirm(model, settings, diagnostics)


FIX_AVAILABILITY = _FixAvailability()


def guarded_check(
    data: bytes, display: str, settings: FileSettings, *, prefiltered: bool = False, confirm_fixes: bool = True
) -> FileReport:
    """`check_source` on a deep-stack thread, inside the file's error boundary: whatever fails
    (a RecursionError, a bug) is one error of this file and the run goes on. A diagnostic is
    marked fixable only where `fix` really removes it; with `confirm_fixes=False` (the editor's
    first, fast pass: confirming costs a libcst parse) each keeps its rule's offer and no edits,
    the diagnostics otherwise the same."""
    if is_notebook(display):
        # its code cells are checked as one module, and each position mapped back to its cell
        try:
            notebook = read_notebook(data)
        except NotebookError as exc:
            return FileReport(path=display, errors=[notebook_error(display, exc)])
        data = notebook.source.encode("utf-8")
        return notebook.map_report(_guarded_module(data, display, settings, prefiltered, confirm_fixes))
    return _guarded_module(data, display, settings, prefiltered, confirm_fixes)


def _guarded_module(
    data: bytes, display: str, settings: FileSettings, prefiltered: bool, confirm_fixes: bool = True
) -> FileReport:
    from offlint.analysis.deep_stack import on_deep_stack
    from offlint.analysis.engine import parse_error

    fixes = FIX_AVAILABILITY if confirm_fixes else None
    try:
        return on_deep_stack(
            lambda: check_source(data, display, settings, prefiltered=prefiltered, fixes=fixes)
        )
    except Exception as exc:
        return FileReport(path=display, errors=[parse_error(display, exc)])


def _warm_up() -> None:
    """Pool initializer: die with the parent, then pay for libcst and the rules while the main
    process is still reading."""
    from offlint.pipeline.processes import watch_parent

    watch_parent()
    import libcst  # noqa: F401

    import offlint.analysis.model  # noqa: F401
    from offlint.analysis.rules import all_rules

    all_rules()


class _Pool:
    def __init__(self, workers: int) -> None:
        # the pool's imports are made in _start: a run that needs no pool (a warm cache, a small
        # tree) never pays for them
        self.workers = workers
        self.executor = self._start(workers)

    def _start(self, workers: int) -> ProcessPoolExecutor:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = None
        if sys.platform.startswith("linux"):
            # fork: workers start in milliseconds with the parent's imports (the parent has not
            # imported libcst, and holds no threads yet)
            context = multiprocessing.get_context("fork")
        executor = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_warm_up)
        # start the workers now, so their imports overlap the caller's work
        self._warm: list[Future[None]] = [executor.submit(_noop) for _ in range(workers)]
        return executor

    def run(self, jobs: Sequence[Job]) -> Iterator[FileReport]:
        """Largest first (the longest parse must not start last); results as they complete.

        A worker that dies (killed, or a crash in native code the guard did not foresee) breaks
        the pool and fails every file still in it: those are analysed again, each in a process
        of its own, so only the file that kills its process is reported, as one error."""
        from concurrent.futures import as_completed
        from concurrent.futures.process import BrokenProcessPool

        ordered = sorted(jobs, key=lambda job: -len(job[0]))
        futures = {self.executor.submit(_analyse, job): job for job in ordered}
        failed: list[Job] = []
        for future in as_completed(futures):
            try:
                yield future.result()
            except BrokenProcessPool:
                failed.append(futures[future])
        if failed:
            self.executor.shutdown(wait=True, cancel_futures=True)
            for job in failed:
                yield _analyse_alone(job)
            self.executor = self._start(self.workers)

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


def _analyse_alone(job: Job) -> FileReport:
    """One file in a process of its own: a crash there is this file's error, not the run's."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    from offlint.pipeline.processes import watch_parent

    with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=watch_parent) as alone:
        try:
            return alone.submit(_analyse, job).result()
        except BrokenProcessPool:
            display = job[1]
            return FileReport(
                path=display,
                errors=[FileError(display, ErrorKind.INTERNAL, "the process analysing this file crashed")],
            )


def _noop() -> None:
    return None


def analyse_all(jobs: Sequence[Job], workers: int | None) -> list[FileReport]:
    """Analyse already-read files (no cache): serially unless there is enough work for a pool."""
    total = sum(len(data) for data, _, _ in jobs)
    if serial_only(workers) or len(jobs) < 2 or total < PARALLEL_THRESHOLD_BYTES:
        return [guarded_check(*job) for job in jobs]
    pool = _Pool(worker_count(workers, len(jobs)))
    try:
        early = [r for r in (_prefilter(*job) for job in jobs) if r is not None]
        settled = {r.path for r in early}
        return early + list(pool.run([job for job in jobs if job[1] not in settled]))
    finally:
        pool.close()


class _Clock:
    """Sums wall time per stage into `RunReport.timings`."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings

    def add(self, stage: str, seconds: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + seconds

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - started)
