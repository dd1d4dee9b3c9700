"""`offlint check` end to end: options -> RunReport -> rendered output -> exit code."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from offlint.analysis.engine import check_source
from offlint.analysis.run import CheckOptions, check_paths, settings_for
from offlint.catalogue import CatalogueError
from offlint.config import ConfigError, ConfigFinder, SelectionOverrides
from offlint.diagnostics import RunReport

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def exit_code_for(report: RunReport) -> int:
    if report.all_errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if report.diagnostics else EXIT_CLEAN


def check_stdin(stdin_filename: str | None, overrides: SelectionOverrides, config_file: Path | None) -> RunReport:
    display = stdin_filename or "-"
    cwd = Path.cwd()
    finder = ConfigFinder(config_file, fallback_root=cwd)
    where = Path(stdin_filename) if stdin_filename else cwd / "stdin.py"
    settings = settings_for(finder.for_path(where), overrides, where)
    data = sys.stdin.buffer.read()
    report = RunReport()
    report.files.append(check_source(data, display, settings))
    return report


def run_check_command(
    *,
    paths: tuple[Path, ...],
    select: tuple[str, ...] | None,
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str,
    output_file: Path | None,
    statistics: bool,
    config_file: Path | None,
    stdin_filename: str | None,
    jobs: int | None,
    use_cache: bool,
    timings: bool,
    color: bool | None,
) -> int:
    from offlint.reporting import render, render_statistics
    from offlint.reporting.summary import render_summary

    overrides = SelectionOverrides(select=select, extend_select=extend_select, ignore=ignore)
    started = time.perf_counter()
    try:
        if any(str(p) == "-" for p in paths):
            if len(paths) > 1:
                raise ConfigError("`-` (stdin) cannot be combined with other paths")
            report = check_stdin(stdin_filename, overrides, config_file)
        else:
            report = check_paths(
                CheckOptions(
                    paths=paths,
                    overrides=overrides,
                    config_file=config_file,
                    jobs=jobs,
                    use_cache=use_cache,
                )
            )
    except (ConfigError, CatalogueError) as exc:
        click.echo(f"offlint: error: {exc}", err=True)
        return EXIT_ERROR
    report.timings.setdefault("total", time.perf_counter() - started)

    to_terminal = output_file is None and sys.stdout.isatty()
    use_color = to_terminal if color is None else color
    root = Path.cwd()
    text = render_statistics(report, output_format) if statistics else render(
        report, output_format, root=root, color=use_color
    )
    if output_file is not None:
        try:
            output_file.write_text(text, encoding="utf-8")
        except OSError as exc:
            click.echo(f"offlint: error: cannot write {output_file}: {exc.strerror or exc}", err=True)
            return EXIT_ERROR
    elif text:
        click.echo(text, nl=not text.endswith("\n"))
    click.echo(render_summary(report), err=True, nl=False)
    if timings:
        click.echo(_timings_table(report), err=True)
    return exit_code_for(report)


def _timings_table(report: RunReport) -> str:
    totals: dict[str, float] = dict(report.timings)
    for file_report in report.files:
        for stage, seconds in file_report.timings.items():
            totals[f"files:{stage}"] = totals.get(f"files:{stage}", 0.0) + seconds
    parsed = report.files_parsed
    lines = [f"timings ({len(report.files)} files, {parsed} parsed):"]
    for stage, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {stage:<24} {seconds * 1000:10.1f} ms")
    return "\n".join(lines)
