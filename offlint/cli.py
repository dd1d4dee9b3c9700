"""The `offlint` command line.

Subcommands are imported only when invoked: `offlint probe` must run where libcst is absent
(the GPU image), and `offlint check` must never import torch.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from offlint import __version__

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

_LAZY_COMMANDS = {
    "check": ("offlint.cli", "check_command"),
    "fix": ("offlint.fixing.command", "fix_command"),
    "probe": ("offlint.probing.command", "probe_command"),
    "rule": ("offlint.cli", "rule_command"),
    "rules": ("offlint.cli", "rules_command"),
}
_HELP = {
    "check": "Find CUDA-graph capture hazards in Python files.",
    "fix": "Rewrite offloader code into the capture-aware pattern (diff by default).",
    "probe": "Run an offloader under CUDA graph capture on a GPU and measure it.",
    "rule": "Show the documentation of one rule.",
    "rules": "List every rule.",
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

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # list without importing: help must work where libcst or torch are missing
        with formatter.section("Commands"):
            formatter.write_dl([(name, _HELP[name]) for name in sorted(_LAZY_COMMANDS)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="offlint")
def main() -> None:
    """offlint: find and fix CUDA-graph capture hazards in PyTorch weight offloaders."""


def fail(message: str) -> NoReturn:
    """One clear line on stderr and exit code 2: never a traceback."""
    click.echo(f"offlint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


@click.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces config); ALL for every rule.")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable on top of the selection.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option(
    "--output-format",
    type=click.Choice(["full", "concise", "json", "sarif", "github"]),
    default="full",
    show_default=True,
)
@click.option("-o", "--output-file", type=click.Path(path_type=Path), help="Write the report here instead of stdout.")
@click.option("--statistics", is_flag=True, help="Show counts per rule instead of each diagnostic.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when diagnostics are found.")
@click.option(
    "--min-confidence",
    type=click.Choice(["high", "medium", "low"]),
    help="Report findings reached at least this surely (default: medium; config min-confidence). "
    "high: from a capture region in the tree; medium: the forward path of offloader-style code; "
    "low: any method of a class that holds streams or events.",
)
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="Use this pyproject.toml / offlint.toml.")
@click.option("--stdin-filename", help="Name (and config location) of source read from `-`; without PATHS, read stdin.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: number of cores).")
@click.option("--no-cache", is_flag=True, help="Do not read or write .offlint_cache.")
@click.option("--timings", is_flag=True, help="Print where the time went (stderr).")
@click.option("--color/--no-color", default=None, help="Force colour on or off (default: when stdout is a terminal).")
@click.option(
    "--parser",
    type=click.Choice(["cpython", "libcst"]),
    default="cpython",
    show_default=True,
    help="cpython: CPython's parser builds a libcst-typed skeleton (fast); libcst: libcst's own "
    "parser (the reference the tests compare against; 3-6x slower). Same diagnostics.",
)
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
    config_file: Path | None,
    stdin_filename: str | None,
    jobs: int | None,
    no_cache: bool,
    timings: bool,
    color: bool | None,
    parser: str,
) -> None:
    """Find CUDA-graph capture hazards in PATHS (files, folders, or - for stdin)."""
    from offlint.analysis.checking import run_check_command

    if not paths:
        # like ruff: `--stdin-filename` without paths means the source comes from stdin
        paths = (Path("-"),) if stdin_filename else (Path("."),)
    code = run_check_command(
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
        timings=timings,
        color=color,
        front_end="libcst" if parser == "libcst" else "skeleton",
        min_confidence=min_confidence,
    )
    if exit_zero and code == EXIT_FINDINGS:
        code = EXIT_CLEAN
    sys.exit(code)


@click.command("rule")
@click.argument("code")
def rule_command(code: str) -> None:
    """Show the documentation of rule CODE (a code like OFL101, or its name)."""
    from offlint.catalogue import CatalogueError, load_catalogue

    try:
        catalogue = load_catalogue()
    except CatalogueError as exc:
        fail(str(exc))
    wanted = code.strip()
    spec = catalogue.get(wanted.upper()) or next((s for s in catalogue.values() if s.name == wanted), None)
    if spec is None:
        fail(f"unknown rule {code!r} (see `offlint rules`)")
    assert spec is not None
    click.echo(spec.markdown(), nl=False)


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
