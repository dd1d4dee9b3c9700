"""Command-line options `check` and `fix` share, stated once (click decorators)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from offlint.config import DiscoveryOverrides

F = TypeVar("F", bound=Callable[..., object])


def discovery_options(command: F) -> F:
    """`--force-exclude/--no-force-exclude` and `--respect-gitignore/--no-respect-gitignore`
    (the config's `force-exclude` and `respect-gitignore`, overridden for this run)."""
    command = click.option(
        "--respect-gitignore/--no-respect-gitignore",
        default=None,
        help="Skip files git ignores while walking folders (default: on; config respect-gitignore).",
    )(command)
    return click.option(
        "--force-exclude/--no-force-exclude",
        default=None,
        help="Apply `exclude` to files named on the command line too (default: off, as in ruff; config force-exclude; the pre-commit hooks pass it).",
    )(command)


def config_options(command: F) -> F:
    """The configuration as ruff's command line changes it: `--config` (a file, or a TOML
    `KEY = VALUE` over every config file; repeatable), `--isolated`, `--exclude`,
    `--extend-exclude`, `--per-file-ignores`."""
    for option in reversed(
        (
            click.option(
                "--config",
                "config_values",
                multiple=True,
                metavar="FILE|KEY=VALUE",
                help="A config file to use instead of discovery (pyproject.toml, offlint.toml), or a "
                'TOML `KEY = VALUE` that overrides every config file (`--config "select = [\'OFL1\']"`); repeatable.',
            ),
            click.option("--isolated", is_flag=True, help="Ignore every config file (the defaults and the command line only)."),
            click.option(
                "--exclude",
                multiple=True,
                help="Globs of files and folders to leave out, replacing the config's `exclude` (comma-separated; repeatable).",
            ),
            click.option(
                "--extend-exclude",
                multiple=True,
                help="Globs to leave out on top of the config's (comma-separated; repeatable).",
            ),
            click.option(
                "--fixable",
                multiple=True,
                help="Rule codes or prefixes whose fixes may be applied, replacing the config's `fixable` (comma-separated).",
            ),
            click.option(
                "--unfixable",
                multiple=True,
                help="Rule codes or prefixes whose fixes are never applied, replacing the config's `unfixable`.",
            ),
            click.option(
                "--per-file-ignores",
                multiple=True,
                metavar="GLOB:CODES",
                help="Codes to ignore in matching files, replacing the config's (`tests/*:OFL105,OFL106`; repeatable).",
            ),
        )
    ):
        command = option(command)
    return command


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def command_line_config(
    config_values: tuple[str, ...],
    *,
    isolated: bool,
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    per_file_ignores: tuple[str, ...],
    respect_gitignore: bool | None,
    force_exclude: bool | None,
    fixable: tuple[str, ...] = (),
    unfixable: tuple[str, ...] = (),
) -> tuple[Path | None, DiscoveryOverrides]:
    """The config file named by `--config` (None: discovery), and the overrides of every config.
    A `--config` value is a file when one of that name exists or it has no `=` (as ruff decides).
    Raises ConfigError for a bad value."""
    from offlint.config import (
        ConfigError,
        DiscoveryOverrides,
        parse_override,
        parse_per_file_ignores,
    )

    files: list[Path] = []
    settings: dict[str, Any] = {}
    for value in config_values:
        if "=" not in value or Path(value).is_file():
            files.append(Path(value))
        else:
            settings.update(parse_override(value))
    if len(files) > 1:
        raise ConfigError(f"--config names two files ({files[0]}, {files[1]}): give one")
    if exclude:
        settings["exclude"] = _split(exclude)
    if per_file_ignores:
        settings["per-file-ignores"] = parse_per_file_ignores(per_file_ignores)
    if fixable:
        settings["fixable"] = _split(fixable)
    if unfixable:
        settings["unfixable"] = _split(unfixable)
    overrides = DiscoveryOverrides(
        respect_gitignore=respect_gitignore,
        force_exclude=force_exclude,
        settings=settings,
        extend_exclude=tuple(_split(extend_exclude)),
        isolated=isolated,
    )
    return (files[0] if files else None), overrides
