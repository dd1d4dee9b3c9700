"""Command-line options `check` and `fix` share, stated once (click decorators)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

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
        help="Apply `exclude` to files named on the command line too (default: on; config force-exclude).",
    )(command)
