"""The `offlint` command line.

Subcommands are imported only when invoked: `offlint probe` must run where libcst is absent
(the GPU image), and `offlint check` must never import torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from offlint import __version__
from offlint.cli_options import config_options, discovery_options
from offlint.reporting import OUTPUT_FORMATS

if TYPE_CHECKING:
    from offlint.baseline import Baseline
    from offlint.config import Config, ConfigFinder, DiscoveryOverrides, SelectionOverrides
    from offlint.diagnostics import RunReport

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2
# `offlint server` without its extra (pygls, lsprotocol): told apart from a usage error
EXIT_MISSING_EXTRA = 3

_LAZY_COMMANDS = {
    "check": ("offlint.cli", "check_command"),
    "fix": ("offlint.cli_fix", "fix_command"),
    "probe": ("offlint.probing.command", "probe_command"),
    "rule": ("offlint.cli", "rule_command"),
    "rules": ("offlint.cli", "rules_command"),
    "clean": ("offlint.cli", "clean_command"),
    "server": ("offlint.cli", "server_command"),
}
_HELP = {
    "check": "Find CUDA-graph capture hazards in Python files.",
    "fix": "Rewrite offloader code into the capture-aware pattern (diff by default).",
    "probe": "Run an offloader under CUDA graph capture on a GPU and measure it.",
    "rule": "Show the documentation of one rule.",
    "rules": "List every rule.",
    "clean": "Remove the cache folders of a project.",
    "server": "Serve diagnostics and fixes to an editor (Language Server Protocol, stdio).",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _LAZY_COMMANDS.get(cmd_name)
        if target is None:
            return None
        try:
            module = importlib.import_module(target[0])
        except ImportError as exc:
            # one line and exit 2 (never a traceback) when a subcommand cannot be loaded here
            fail(f"`offlint {cmd_name}` is not available: {exc}")
        command = getattr(module, target[1])
        assert isinstance(command, click.Command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if args and name not in _LAZY_COMMANDS and not name.startswith("-"):
            import difflib

            close = difflib.get_close_matches(name, sorted(_LAZY_COMMANDS), n=1, cutoff=0.6)
            hint = f" (did you mean `offlint {close[0]}`?)" if close else ""
            ctx.fail(f"unknown command {name!r}{hint}")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # list without importing: help must work where libcst or torch are missing
        with formatter.section("Commands"):
            formatter.write_dl([(name, _HELP[name]) for name in sorted(_LAZY_COMMANDS)])


def _installed_version(distribution: str) -> str:
    """A distribution's version from its metadata (never importing it: torch takes seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    """`offlint --version`: offlint's, and those of what decides its behaviour."""
    python = ".".join(map(str, sys.version_info[:3]))
    return (
        f"offlint {__version__}\n"
        f"libcst {_installed_version('libcst')}\n"
        f"torch {_installed_version('torch')}\n"
        f"python {python}"
    )


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show offlint's version and those of libcst, torch and Python, and exit.",
)
def main() -> None:
    """offlint: find and fix CUDA-graph capture hazards in PyTorch weight offloaders."""


def fail(message: str) -> NoReturn:
    """One clear line on stderr and exit code 2: never a traceback."""
    click.echo(f"offlint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def use_color(flag: bool | None, to_terminal: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour: `--color/--no-color`, then NO_COLOR (no-color.org), then FORCE_COLOR,
    then TERM=dumb (no colour), then whether the output is a terminal. An empty variable is
    unset, as both conventions say."""
    env = os.environ if environ is None else environ
    if flag is not None:
        return flag
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("TERM") == "dumb":
        return False
    return to_terminal


@click.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces config); ALL for every rule.")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable on top of the selection.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option(
    "--output-format",
    type=click.Choice(list(OUTPUT_FORMATS)),
    default="full",
    show_default=True,
    envvar="OFFLINT_OUTPUT_FORMAT",
    show_envvar=True,
    help="How findings are shown (json: ruff's list; offlint-json: offlint's object with a summary).",
)
@click.option("-o", "--output-file", type=click.Path(path_type=Path), help="Write the report here instead of stdout.")
@click.option("--statistics", is_flag=True, help="Show counts per rule instead of each diagnostic.")
@click.option("-e", "--exit-zero", is_flag=True, help="Exit 0 even when diagnostics are found.")
@click.option(
    "--min-confidence",
    type=click.Choice(["high", "medium", "low"]),
    help="Report findings reached at least this surely (default: medium; config min-confidence). "
    "high: from a capture region in the tree; medium: the forward path of offloader-style code; "
    "low: any method of a class that holds streams or events.",
)
@config_options
@click.option("--stdin-filename", help="Name (and config location) of source read from `-`; without PATHS, read stdin.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: number of cores).")
@click.option("-n", "--no-cache", is_flag=True, help="Do not read or write the cache.")
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="OFFLINT_CACHE_DIR",
    help="Keep the cache here [env: OFFLINT_CACHE_DIR] (default: .offlint_cache in the project root).",
)
@click.option("--timings", is_flag=True, help="Print where the time went (stderr).")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show files done / total and the phase on stderr (default: on a terminal, once a run takes about a second; off with -q/-s).",
)
@click.option(
    "--color/--no-color",
    default=None,
    help="Force colour on or off (default: NO_COLOR, FORCE_COLOR, TERM=dumb, else when stdout is a terminal).",
)
@click.option(
    "--parser",
    type=click.Choice(["cpython", "libcst"]),
    default="cpython",
    show_default=True,
    help="cpython: CPython's parser builds a libcst-typed skeleton (fast); libcst: libcst's own "
    "parser (the reference the tests compare against; 3-6x slower). Same diagnostics.",
)
@discovery_options
@click.option(
    "--add-noqa",
    is_flag=True,
    help="Add `# offlint: ignore[CODE]` to every line with a finding (keeping its comments), then exit.",
)
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(path_type=Path),
    help="Do not report the findings recorded in this baseline file; new ones still fail.",
)
@click.option(
    "--write-baseline",
    "write_baseline_file",
    type=click.Path(path_type=Path),
    help="Record every current finding in this baseline file (for --baseline), then exit 0.",
)
@click.option("--show-settings", is_flag=True, help="Show the settings the first PATH is checked with, then exit.")
@click.option("--show-files", is_flag=True, help="List the files that would be checked, then exit.")
@click.option("-q", "--quiet", is_flag=True, help="Print the report and run errors only (no summary).")
@click.option("-s", "--silent", is_flag=True, help="Print nothing (the exit code still says 1 for findings, 2 for errors).")
@click.option("-v", "--verbose", is_flag=True, help="Also say which config files apply, what was skipped, and the time.")
@click.option("--fix", is_flag=True, help="Apply the safe fixes (writes files), then report what is left.")
@click.option("--fix-only", is_flag=True, help="Apply the fixes (as --fix) and report nothing that is left; exit 0 unless --exit-non-zero-on-fix.")
@click.option(
    "--exit-non-zero-on-fix",
    is_flag=True,
    help="With --fix / --fix-only: exit 1 when a fix was applied, even with no finding left.",
)
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff: the unsafe fixes too (`offlint rules` lists each's safety).")
@click.option("--show-fixes", is_flag=True, help="With --fix: list each fix applied (stderr).")
@click.option("--diff", is_flag=True, help="Print the diff the fixes would make and exit (1 when there is one); writes nothing.")
def check_command(
    paths: tuple[Path, ...],
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str,
    output_file: Path | None,
    statistics: bool,
    exit_zero: bool,
    min_confidence: str | None,
    config_values: tuple[str, ...],
    isolated: bool,
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    fixable: tuple[str, ...],
    unfixable: tuple[str, ...],
    per_file_ignores: tuple[str, ...],
    stdin_filename: str | None,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
    timings: bool,
    progress: bool | None,
    color: bool | None,
    parser: str,
    force_exclude: bool | None,
    respect_gitignore: bool | None,
    add_noqa: bool,
    baseline_file: Path | None,
    write_baseline_file: Path | None,
    show_settings: bool,
    show_files: bool,
    quiet: bool,
    silent: bool,
    verbose: bool,
    fix: bool,
    fix_only: bool,
    exit_non_zero_on_fix: bool,
    unsafe_fixes: bool,
    show_fixes: bool,
    diff: bool,
) -> None:
    """Find CUDA-graph capture hazards in PATHS (files, folders, or - for stdin)."""
    if (quiet or silent) and verbose:
        fail(f"{'-s/--silent' if silent else '-q/--quiet'} and -v/--verbose cannot be combined")
    from offlint.cli_options import command_line_config
    from offlint.config import ConfigError

    try:
        config_file, config_overrides = command_line_config(
            config_values,
            isolated=isolated,
            exclude=exclude,
            extend_exclude=extend_exclude,
            per_file_ignores=per_file_ignores,
            respect_gitignore=respect_gitignore,
            force_exclude=force_exclude,
            fixable=fixable,
            unfixable=unfixable,
        )
    except ConfigError as exc:
        fail(str(exc))
    fix = fix or fix_only
    if fix and diff:
        fail("--fix and --diff cannot be combined (--diff writes nothing)")
    if (unsafe_fixes or show_fixes) and not (fix or diff):
        fail("--unsafe-fixes and --show-fixes go with --fix (or --diff)")
    if exit_non_zero_on_fix and not fix:
        fail("--exit-non-zero-on-fix goes with --fix or --fix-only")
    # each of these replaces the report with something else: one at a time
    modes = {
        "--add-noqa": add_noqa,
        "--write-baseline": write_baseline_file is not None,
        "--show-settings": show_settings,
        "--show-files": show_files,
    }
    exclusive = [name for name, on in modes.items() if on]
    if len(exclusive) > 1:
        fail(f"{exclusive[0]} and {exclusive[1]} cannot be combined")
    if not paths:
        # like ruff: `--stdin-filename` without paths means the source comes from stdin
        paths = (Path("-"),) if stdin_filename else (Path("."),)
    wrote = False
    if fix or diff:
        # `-`: the fixed source (or the diff) on stdout, what is left on stderr (editors)
        stdin = Path("-") in paths
        from offlint.config import discovery_overrides

        with discovery_overrides(config_overrides):
            fixed = apply_check_fixes(
                paths,
                write=fix,
                unsafe=unsafe_fixes,
                show=show_fixes or diff,
                select=_split(select) if select else None,
                ignore=_split(ignore),
                config_file=config_file,
                min_confidence=min_confidence,
                color=use_color(color, sys.stdout.isatty()),
                stdin_filename=stdin_filename,
                summary=fix_only and not (quiet or silent),
            )
        if stdin and exit_zero and fixed == EXIT_FINDINGS:
            fixed = EXIT_CLEAN
        if diff or stdin or fixed == EXIT_ERROR:
            sys.exit(fixed)
        # for files, EXIT_FINDINGS here says a fix was written (what is left is the check's)
        wrote = fixed == EXIT_FINDINGS
        if fix_only:
            sys.exit(EXIT_FINDINGS if wrote and exit_non_zero_on_fix else EXIT_CLEAN)
    code = run_check(
        CheckRequest(
            paths=paths,
            select=_split(select) if select else None,
            extend_select=_split(extend_select),
            ignore=_split(ignore),
            output_format=output_format,
            output_file=output_file,
            statistics=statistics,
            config_file=config_file,
            stdin_filename=stdin_filename,
            jobs=jobs,
            use_cache=not no_cache,
            cache_dir=cache_dir,
            timings=timings,
            progress=progress,
            color=color,
            front_end="libcst" if parser == "libcst" else "skeleton",
            min_confidence=min_confidence,
            force_exclude=force_exclude,
            respect_gitignore=respect_gitignore,
            add_noqa=add_noqa,
            baseline=baseline_file,
            write_baseline=write_baseline_file,
            show_settings=show_settings,
            show_files=show_files,
            quiet=quiet,
            silent=silent,
            verbose=verbose,
            config_overrides=config_overrides,
        )
    )
    if exit_zero and code == EXIT_FINDINGS:
        code = EXIT_CLEAN
    if fix and exit_non_zero_on_fix and code == EXIT_CLEAN and wrote:
        code = EXIT_FINDINGS
    sys.exit(code)


def apply_check_fixes(
    paths: tuple[Path, ...],
    *,
    write: bool,
    unsafe: bool,
    show: bool,
    select: tuple[str, ...] | None,
    ignore: tuple[str, ...],
    config_file: Path | None,
    min_confidence: str | None,
    color: bool,
    stdin_filename: str | None = None,
    summary: bool = False,
) -> int:
    """`check --fix` / `--diff`, as ruff's: the fixes of the findings `check` shows, the safe ones
    unless `unsafe` (each rule's safety is stated once, in its rules/ file); `fix`'s own engine
    does the writing (atomic, never over a file changed since it was read). Its per-edit listing
    goes to stderr only when asked for (`--show-fixes`, `--diff`)."""
    import contextlib
    import io

    from offlint.catalogue import load_catalogue
    from offlint.config import ConfigError, ConfigFinder, unfixable_codes
    from offlint.pipeline.fix import run_fix

    catalogue = load_catalogue()
    unsafe_codes = () if unsafe else tuple(
        code for code, spec in catalogue.items() if spec.fix_safety.value != "safe"
    )
    # `fixable` / `unfixable` of the configuration that applies (the first path's)
    first = Path(stdin_filename) if Path("-") in paths and stdin_filename else paths[0]
    try:
        config = _config_of(ConfigFinder(config_file, fallback_root=Path.cwd()), first)
        withheld = sorted(set(unsafe_codes) | unfixable_codes(config, sorted(catalogue)))
    except ConfigError as exc:
        click.echo(f"offlint: error: {exc}", err=True)
        return EXIT_ERROR
    listing = io.StringIO()
    # stdin: stderr is all the report there is (the fixed source is on stdout)
    stdin = Path("-") in paths
    with contextlib.redirect_stderr(sys.stderr if show or stdin else listing):
        code = run_fix(
            paths=paths,
            apply=write,
            show_diff=not write,
            strategy=None,
            select=select,
            ignore=ignore,
            output_format="text",
            config_file=config_file,
            color=color,
            min_confidence=min_confidence,
            exit_zero=not stdin,  # a file's findings left are reported by the check that follows
            apply_hint="--fix --unsafe-fixes" if unsafe else "--fix",
            stdin_filename=stdin_filename,
            not_fixed_codes=tuple(withheld),
            exit_non_zero_on_fix=not stdin,  # 1 then says a fix was written
        )
    if code == EXIT_ERROR and not show:
        click.echo(listing.getvalue(), err=True, nl=False)  # the errors, at least
    elif not show:
        # files it left alone say so (a notebook), whether or not the listing was asked for
        # (and --fix-only its closing line: it reports nothing else)
        wanted = ("offlint: note:", "Fixed ", "Nothing to fix", "No safe fixes") if summary else ("offlint: note:",)
        notes = [line for line in listing.getvalue().splitlines() if line.startswith(wanted)]
        click.echo("".join(note + "\n" for note in notes), err=True, nl=False)
    return code


@dataclass(frozen=True)
class CheckRequest:
    """Everything `offlint check` was asked to do."""

    paths: tuple[Path, ...]
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    output_format: str = "full"
    output_file: Path | None = None
    statistics: bool = False
    config_file: Path | None = None
    stdin_filename: str | None = None
    jobs: int | None = None
    use_cache: bool = True
    cache_dir: Path | None = None
    timings: bool = False
    progress: bool | None = None  # --progress/--no-progress; None: on a terminal, after a second
    color: bool | None = None
    front_end: str = "skeleton"
    min_confidence: str | None = None
    force_exclude: bool | None = None
    respect_gitignore: bool | None = None
    add_noqa: bool = False
    baseline: Path | None = None
    write_baseline: Path | None = None
    show_settings: bool = False
    show_files: bool = False
    quiet: bool = False
    silent: bool = False
    verbose: bool = False
    # --config KEY=VALUE, --isolated, --exclude & co.; None: only the two discovery flags above
    config_overrides: DiscoveryOverrides | None = None


def run_check(request: CheckRequest) -> int:
    """`offlint check` end to end: options -> report -> baseline -> output -> exit code. Problems
    with the configuration, the selection or the baseline are one line and exit 2."""
    from offlint.catalogue import CatalogueError
    from offlint.config import (
        ConfigError,
        DiscoveryOverrides,
        SelectionOverrides,
        discovery_overrides,
    )

    overrides = SelectionOverrides(
        select=request.select,
        extend_select=request.extend_select,
        ignore=request.ignore,
        min_confidence=request.min_confidence,
    )
    discovery = request.config_overrides or DiscoveryOverrides(
        respect_gitignore=request.respect_gitignore, force_exclude=request.force_exclude
    )
    stdin = any(str(p) == "-" for p in request.paths)
    try:
        with discovery_overrides(discovery):
            if stdin and len(request.paths) > 1:
                raise ConfigError("`-` (stdin) cannot be combined with other paths")
            if stdin and (request.add_noqa or request.show_files):
                raise ConfigError(f"{'--add-noqa' if request.add_noqa else '--show-files'} needs files, not `-` (stdin)")
            from offlint.pipeline.check_command import validate_overrides

            validate_overrides(overrides)
            if request.show_files:
                return _show_files(request)
            if request.show_settings:
                return _show_settings(request, overrides)
            baseline = None
            if request.baseline is not None:
                from offlint.baseline import Baseline

                baseline = Baseline.load(request.baseline)
            return _check_and_report(request, overrides, baseline)
    except (ConfigError, CatalogueError) as exc:
        click.echo(f"offlint: error: {exc}", err=True)
        return EXIT_ERROR


def _check_and_report(request: CheckRequest, overrides: SelectionOverrides, baseline: Baseline | None) -> int:
    import time

    from offlint.pipeline.check import CheckOptions, check_paths
    from offlint.pipeline.check_command import check_stdin, exit_code_for
    from offlint.reporting import render, render_run_errors, render_statistics, render_summary

    started = time.perf_counter()
    sources: dict[str, str] = {}
    if any(str(p) == "-" for p in request.paths):
        report, sources = check_stdin(request.stdin_filename, overrides, request.config_file, request.front_end)
    else:
        display = _progress_display(request)
        try:
            report = check_paths(
                CheckOptions(
                    paths=request.paths,
                    overrides=overrides,
                    config_file=request.config_file,
                    jobs=request.jobs,
                    use_cache=request.use_cache,
                    front_end=request.front_end,
                    cache_dir=request.cache_dir,
                    progress=display,
                )
            )
        finally:
            if display is not None:
                display.close()
    report.timings.setdefault("total", time.perf_counter() - started)
    _without_unfixable(request, report)
    cwd = Path.cwd()
    if request.write_baseline is not None:
        return _write_baseline(request, report, cwd)
    if request.add_noqa:
        return _add_noqa(request, report, cwd)
    in_baseline = baseline.filter(report, cwd) if baseline is not None else 0

    to_terminal = request.output_file is None and sys.stdout.isatty()
    color = use_color(request.color, to_terminal)
    if request.silent and request.output_file is None:
        return exit_code_for(report)  # -s: nothing printed, the exit code says it all
    if request.statistics:
        text = render_statistics(report, request.output_format)
    else:
        project = _finder(request).project_root(request.paths[0]) if not stdin_run(request) else cwd
        first = Path(request.stdin_filename or "stdin.py") if stdin_run(request) else request.paths[0]
        text = render(
            report,
            request.output_format,
            root=cwd,
            color=color,
            sources=sources,
            project_root=project,
            docs_url=_config_of(_finder(request), first).docs_url,
        )
    if request.output_file is not None:
        try:
            request.output_file.write_text(text, encoding="utf-8")
        except OSError as exc:
            click.echo(f"offlint: error: cannot write {request.output_file}: {exc.strerror or exc}", err=True)
            return EXIT_ERROR
    elif text:
        # color=: click strips escape codes from non-terminals, which would undo --color
        click.echo(text, nl=not text.endswith("\n"), color=color)
    if request.silent:
        pass  # -s with -o FILE: the report is written, nothing printed
    elif request.quiet:
        click.echo(render_run_errors(report), err=True, nl=False)
    else:
        click.echo(render_summary(report), err=True, nl=False)
        if in_baseline:
            noun = "finding" if in_baseline == 1 else "findings"
            click.echo(f"{in_baseline} {noun} in the baseline ({request.baseline}) not shown.", err=True)
        if not report.files and not report.all_errors:
            click.echo(f"offlint: warning: {_why_nothing_checked(report)}", err=True)
    if request.verbose:
        click.echo(_verbose_lines(request, report, time.perf_counter() - started), err=True, nl=False)
    if request.timings:
        from offlint.pipeline.check_command import _timings_table

        click.echo(_timings_table(report), err=True)
    return exit_code_for(report)


def _progress_display(request: CheckRequest) -> Any:
    """The progress display a run gets: asked for (`--progress`, shown at once), or on a terminal
    (live, once the run takes about a second); never with -q/-s or `--no-progress`."""
    if request.progress is False or request.quiet or request.silent:
        return None
    terminal = sys.stderr.isatty()
    if request.progress is None and not terminal:
        return None
    from offlint.progress import ProgressDisplay

    return ProgressDisplay(sys.stderr, live=terminal, delay=0.0 if request.progress else 1.0)


def _config_of(finder: ConfigFinder, path: Path) -> Config:
    """The configuration of `path` without raising where the path cannot be resolved (a link
    loop, a folder without `x`: the run has reported that file already)."""
    real = os.path.realpath(path)  # never raises, unlike Path.resolve on 3.10/3.11
    try:
        return finder.for_real_folder(real) if os.path.isdir(real) else finder.for_real_file(real)
    except (OSError, RuntimeError):
        return finder.fallback


def _without_unfixable(request: CheckRequest, report: RunReport) -> None:
    """Findings of codes the configuration's `fixable` / `unfixable` leave unfixed offer no fix
    (no `[*]`, no fix in the machine formats), as ruff shows them."""
    from offlint.catalogue import load_catalogue
    from offlint.config import unfixable_codes

    finder = _finder(request)
    codes = sorted(load_catalogue())
    for file_report in report.files:
        if not any(d.fixable for d in file_report.diagnostics):
            continue
        where = Path(request.stdin_filename or "stdin.py") if file_report.path == "-" else Path(file_report.path)
        unfixable = unfixable_codes(_config_of(finder, where), codes)
        if unfixable:
            file_report.diagnostics = [d.without_fix() if d.code in unfixable else d for d in file_report.diagnostics]


def _why_nothing_checked(report: RunReport) -> str:
    """Why a run checked no file: the named files `exclude` left out (--force-exclude), or none found."""
    if not report.excluded:
        return "no Python files found under the given paths"
    named = ", ".join(report.excluded[:3]) + (f" and {len(report.excluded) - 3} more" if len(report.excluded) > 3 else "")
    noun = "file" if len(report.excluded) == 1 else "files"
    return (
        f"every file named was excluded by the configuration's `exclude` with --force-exclude "
        f"({len(report.excluded)} {noun}: {named}); without --force-exclude they are checked"
    )


def _finder(request: CheckRequest) -> ConfigFinder:
    from offlint.config import ConfigFinder

    return ConfigFinder(request.config_file, fallback_root=Path.cwd())


def _show_files(request: CheckRequest) -> int:
    """`--show-files`: every file a check would read, one per line, as it would be shown."""
    from offlint.discovery import discover

    files, errors = discover(list(request.paths), _finder(request), Path.cwd().resolve())
    for found in files:
        click.echo(found.display)
    for error in errors:
        click.echo(error.one_line(), err=True)
    return EXIT_ERROR if errors else EXIT_CLEAN


def _show_settings(request: CheckRequest, overrides: SelectionOverrides) -> int:
    """`--show-settings`: what the first path is checked with, after config and command line."""
    from offlint.pipeline.check import settings_for

    path = request.paths[0]
    if str(path) == "-":
        path = Path(request.stdin_filename or Path.cwd() / "stdin.py")
    config = _finder(request).for_path(path)
    settings = settings_for(config, overrides, path, request.front_end)
    rows = [
        ("path", str(path)),
        ("config", str(config.source) if config.source else "none (defaults)"),
        ("root", str(config.root)),
        ("select", ", ".join(sorted(settings.select)) or "(none)"),
        ("min-confidence", settings.min_confidence.value),
        ("per-file-ignores", "; ".join(f"{glob} = {', '.join(codes)}" for glob, codes in config.per_file_ignores) or "(none)"),
        ("exclude", ", ".join(config.exclude) or "(none)"),
        ("force-exclude", str(config.force_exclude).lower()),
        ("respect-gitignore", str(config.respect_gitignore).lower()),
        ("capture-reachable", ", ".join(config.capture_reachable) or "(none)"),
        ("parser", "libcst" if request.front_end == "libcst" else "cpython"),
        ("cache", _cache_shown(request, _finder(request))),
        ("output-format", request.output_format),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        click.echo(f"{name:<{width}}  {value}")
    return EXIT_CLEAN


def stdin_run(request: CheckRequest) -> bool:
    return any(str(p) == "-" for p in request.paths)


def _cache_shown(request: CheckRequest, finder: ConfigFinder) -> str:
    if not request.use_cache or stdin_run(request):
        return "off"
    from offlint.pipeline.check_command import cache_location

    return str(cache_location(finder, request.paths, request.cache_dir))


def _verbose_lines(request: CheckRequest, report: RunReport, seconds: float) -> str:
    """`-v`: where the project and its cache are, the config files in use, the named files
    force-exclude skipped, and what became of the files (analysed, reused, settled)."""
    from offlint.discovery import discover

    finder = _finder(request)
    skipped: list[str] = []
    lines: list[str] = []
    if not stdin_run(request):
        lines.append(f"offlint: project root {finder.project_root(request.paths[0])}")
        lines.append(f"offlint: cache {_cache_shown(request, finder)}")
        files, _ = discover(list(request.paths), finder, Path.cwd().resolve(), skipped)
        configs: dict[str, int] = {}
        for found in files:
            source = finder.for_real_file(found.real).source
            key = str(source) if source else "none (defaults)"
            configs[key] = configs.get(key, 0) + 1
        if finder.overrides.isolated:
            lines.append("offlint: --isolated: no config file read")
        for where, count in sorted(configs.items()):
            lines.append(f"offlint: config {where}: {count} file{'s' if count != 1 else ''}")
        if finder.overrides.settings or finder.overrides.extend_exclude:
            keys = sorted({*finder.overrides.settings, *(["extend-exclude"] if finder.overrides.extend_exclude else [])})
            lines.append(f"offlint: set on the command line: {', '.join(keys)}")
        for shown in skipped:
            lines.append(f"offlint: skipped {shown}: excluded by configuration (--force-exclude; without it, it is checked)")
    count = len(report.files)
    cached = sum(1 for f in report.files if f.cached)
    analysed = sum(1 for f in report.files if f.parsed and not f.cached)
    settled = count - cached - analysed
    parts = [f"{analysed} analysed"]
    if cached:
        unread = f", {report.unread} of them unchanged since the last run and not read" if report.unread else ""
        parts.append(f"{cached} reused from the cache{unread}")
    if settled:
        parts.append(f"{settled} without possible hazards (not parsed)")
    lines.append(f"offlint: {count} file{'s' if count != 1 else ''} checked in {seconds:.2f} s: {'; '.join(parts)}")
    return "".join(line + "\n" for line in lines)


def _write_baseline(request: CheckRequest, report: RunReport, cwd: Path) -> int:
    from offlint.baseline import write_baseline
    from offlint.guarded_io import Refused

    assert request.write_baseline is not None
    roots = [os.path.realpath(cwd), *(os.path.realpath(path) for path in request.paths)]
    try:
        count = write_baseline(request.write_baseline, report.diagnostics, cwd, roots)
    except Refused as exc:
        click.echo(f"offlint: error: cannot write {request.write_baseline}: {exc}", err=True)
        return EXIT_ERROR
    from offlint.reporting import render_run_errors

    click.echo(render_run_errors(report), err=True, nl=False)
    if not request.quiet:
        noun = "finding" if count == 1 else "findings"
        click.echo(f"Wrote {count} {noun} to {request.write_baseline}.", err=True)
    return EXIT_ERROR if report.all_errors else EXIT_CLEAN


def _add_noqa(request: CheckRequest, report: RunReport, cwd: Path) -> int:
    from offlint.pipeline.add_noqa import add_noqa

    roots = [os.path.realpath(path) for path in request.paths]  # as `fix`'s tree_roots
    return add_noqa(report, cwd, roots, quiet=request.quiet)


@click.command("clean")
@click.argument("path", required=False, type=click.Path(path_type=Path), default=".")
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="OFFLINT_CACHE_DIR",
    help="A cache folder set with check's --cache-dir [env: OFFLINT_CACHE_DIR], removed too when in the project.",
)
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="The config file check was run with.")
def clean_command(path: Path, cache_dir: Path | None, config_file: Path | None) -> None:
    """Remove the cache folders (`.offlint_cache`) under the project root of PATH (default: .).
    Nothing outside the project root is touched."""
    from offlint.config import ConfigError, ConfigFinder
    from offlint.pipeline.check_command import clean_caches

    if not path.exists():
        fail(f"{path}: no such file or directory")
    try:
        root = ConfigFinder(config_file, fallback_root=Path.cwd()).project_root(path)
    except ConfigError as exc:
        fail(str(exc))
    removed, left = clean_caches(root, cache_dir)
    for folder in removed:
        click.echo(f"Removed {folder}")
    for folder, why in left:
        click.echo(f"offlint: warning: left {folder}: {why}", err=True)
    if not removed and not left:
        click.echo(f"No cache under {root}.")


def rule_json(spec: Any) -> dict[str, Any]:
    """One rule as `offlint rule --output-format json` gives it (ruff's fields, and offlint's)."""
    return {
        "name": spec.name,
        "code": spec.code,
        "linter": "offlint",
        "summary": spec.summary,
        "message_formats": [spec.message],
        "fix": {
            "safe": "Fix is always available.",
            "unsafe": "Fix is sometimes available.",
            "none": "Fix is not available.",
        }[spec.fix_safety.value],
        "fix_safety": spec.fix_safety.value,
        "default": spec.default_enabled,
        "prevents": spec.prevents,
        "explanation": spec.markdown(),
        "preview": False,
    }


@click.command("server")
@click.option("--stdio", is_flag=True, help="Talk over stdin/stdout (the default and only transport).")
def server_command(stdio: bool) -> None:
    """Run the language server on stdin/stdout: diagnostics as you type, fixes and suppressions
    as code actions (needs the `server` extra: pip install 'offlint[server]')."""
    try:
        import lsprotocol  # noqa: F401
        import pygls  # noqa: F401
    except ImportError as exc:
        click.echo(
            f"offlint: error: `offlint server` needs the server extra ({exc.name} is not installed):"
            " pip install 'offlint[server]'",
            err=True,
        )
        sys.exit(EXIT_MISSING_EXTRA)
    from offlint.server.server import start

    start()


@click.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Show the documentation of every rule.")
@click.option(
    "--output-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text (Markdown) or json (one object; a list with --all), as ruff's `rule`.",
)
def rule_command(code: str | None, show_all: bool, output_format: str) -> None:
    """Show the documentation of rule CODE (a code like OFL101, or its name), or of every rule
    with --all."""
    import json

    from offlint.catalogue import CatalogueError, load_catalogue

    if show_all == (code is not None):
        fail("give a rule CODE or --all (`offlint rules` lists the codes)")
    try:
        catalogue = load_catalogue()
    except CatalogueError as exc:
        fail(str(exc))
    if show_all:
        specs = list(catalogue.values())
    else:
        assert code is not None
        wanted = code.strip()
        spec = catalogue.get(wanted.upper()) or next((s for s in catalogue.values() if s.name == wanted), None)
        if spec is None:
            import difflib

            close = difflib.get_close_matches(wanted.upper(), sorted(catalogue), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            fail(f"unknown rule {code!r} (see `offlint rules`{hint})")
        assert spec is not None
        specs = [spec]
    if output_format == "json":
        rows = [rule_json(spec) for spec in specs]
        click.echo(json.dumps(rows if show_all else rows[0], indent=2))
        return
    click.echo("\n".join(spec.markdown() for spec in specs), nl=False)


@click.command("rules")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_command(output_format: str) -> None:
    """List every rule: code, name, fix availability, whether it is on by default."""
    import json

    from offlint.catalogue import load_catalogue

    catalogue = load_catalogue()
    if output_format == "json":
        rows: list[dict[str, Any]] = [
            {
                "code": s.code,
                "name": s.name,
                "summary": s.summary,
                "fix": s.fix_safety.value,
                "default": s.default_enabled,
                "prevents": s.prevents,
            }
            for s in catalogue.values()
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    for s in catalogue.values():
        fix = {"safe": "fix", "unsafe": "fix (unsafe)", "none": "-"}[s.fix_safety.value]
        default = "" if s.default_enabled else "  [off by default]"
        click.echo(f"{s.code}  {s.name:<38} {fix:<13}{default}".rstrip())


if __name__ == "__main__":  # pragma: no cover
    main()
