"""`offlint fix`'s command line (the run itself is `pipeline/fix.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from offlint.cli_options import discovery_options


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


@click.command("fix")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--apply",
    "apply_",
    is_flag=True,
    help="Write the fixes (atomically); without it nothing is written.",
)
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="Print the unified diff (the default without --apply).",
)
@click.option(
    "--strategy",
    type=click.Choice(["auto", "overlap", "inline"]),
    default=None,
    help="Offloader rewrite: overlap (primed prefetch, keeps H2D overlapped in graphs) or inline "
    "(smallest change). auto: overlap where applicable. [default: auto, or [tool.offlint.fix] strategy]",
)
@click.option(
    "--compile-safe/--no-compile-safe",
    default=None,
    help="Write no capture test (torch.compile cannot trace one): the primed overlap with a pending "
    "flag, joins that run always; rewrites that need the capture state at run time are left, with "
    "the reason. [default: on where the module uses torch.compile, or [tool.offlint.fix] compile-safe]",
)
@click.option("--select", multiple=True, help="Only fix these rule codes or prefixes.")
@click.option("--ignore", multiple=True, help="Do not fix these rule codes or prefixes.")
@click.option(
    "--min-confidence",
    type=click.Choice(["high", "medium", "low"]),
    help="Fix the findings `check` shows at this floor (default: medium; config min-confidence).",
)
@click.option(
    "--exit-zero",
    is_flag=True,
    help="With --apply: exit 0 even when hazards remain after fixing (by default they fail the run).",
)
@click.option(
    "--exit-non-zero-on-fix",
    is_flag=True,
    help="With --apply: exit 1 when anything was fixed, even if no hazard remains.",
)
@click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="Use this pyproject.toml / offlint.toml.",
)
@click.option(
    "--color/--no-color",
    default=None,
    help="Force colour on or off (default: NO_COLOR, FORCE_COLOR, TERM=dumb, else when stdout is a terminal).",
)
@click.option(
    "--stdin-filename",
    help="Name (and config location) of source read from `-`; without PATHS, read stdin. "
    "The fixed source goes to stdout (the diff with --diff), the rest to stderr.",
)
@discovery_options
def fix_command(
    paths: tuple[Path, ...],
    apply_: bool,
    show_diff: bool,
    strategy: str | None,
    compile_safe: bool | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    min_confidence: str | None,
    exit_zero: bool,
    exit_non_zero_on_fix: bool,
    output_format: str,
    config_file: Path | None,
    color: bool | None,
    stdin_filename: str | None,
    force_exclude: bool | None,
    respect_gitignore: bool | None,
) -> None:
    """Rewrite capture hazards in PATHS into capture-aware code (diff by default); `-`: the
    source on stdin, the fixed source on stdout."""
    from offlint.cli import use_color
    from offlint.config import DiscoveryOverrides, discovery_overrides

    if not paths:
        # like `check`: `--stdin-filename` without paths means the source comes from stdin
        paths = (Path("-"),) if stdin_filename else (Path("."),)
    stdin = Path("-") in paths

    discovery = DiscoveryOverrides(respect_gitignore=respect_gitignore, force_exclude=force_exclude)
    with discovery_overrides(discovery):
        from offlint.pipeline.fix import run_fix

        code = run_fix(
            paths=paths,
            apply=apply_,
            # stdin: the fixed source, or the diff when asked for
            show_diff=show_diff or (not apply_ and not stdin),
            strategy=strategy,
            select=_split(select) if select else None,
            ignore=_split(ignore),
            output_format=output_format,
            config_file=config_file,
            color=use_color(color, sys.stdout.isatty()),
            min_confidence=min_confidence,
            exit_zero=exit_zero,
            exit_non_zero_on_fix=exit_non_zero_on_fix,
            compile_safe=compile_safe,
            stdin_filename=stdin_filename,
        )
    sys.exit(code)


