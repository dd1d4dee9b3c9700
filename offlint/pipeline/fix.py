"""The fix pipeline (`offlint fix`, `check --fix`): which files, which settings, the fixes, the
writes, the report and the exit code.

Exit codes: 2 when any file could not be read, parsed, fixed or written (the others are still
fixed); otherwise, without `--apply`, 1 when something would change and 0 when nothing would;
with `--apply`, 1 while hazards remain (unless `--exit-zero`), else 0.

With `--apply`, writes stay inside the tree named on the command line (`writes.py`), and the
temporary files a killed run left next to the files it fixes are removed first.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from offlint.diagnostics import FileError
from offlint.pipeline.processes import ends_with_the_run
from offlint.reporting._sources import printable

EXIT_CLEAN, EXIT_CHANGES, EXIT_ERROR = 0, 1, 2


@ends_with_the_run
def run_fix(
    *,
    paths: tuple[Path, ...],
    apply: bool,
    show_diff: bool,
    strategy: str | None,
    select: tuple[str, ...] | None,
    ignore: tuple[str, ...],
    output_format: str,
    config_file: Path | None,
    color: bool,
    min_confidence: str | None = None,
    exit_zero: bool = False,
    exit_non_zero_on_fix: bool = False,
    compile_safe: bool | None = None,
) -> int:
    from offlint.catalogue import CatalogueError, load_catalogue
    from offlint.config import ConfigError, ConfigFinder, SelectionOverrides, resolve_selection
    from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE, Confidence
    from offlint.discovery import discover
    from offlint.fixing.apply import FIXABLE_RULES, FileFix, FixSettings, fix_source
    from offlint.fixing.compile_safe import AUTO as COMPILE_SAFE_AUTO
    from offlint.fixing.compile_safe import parse_setting
    from offlint.fixing.diffs import unified_diff
    from offlint.fixing.offloader_rewrite import STRATEGIES
    from offlint.fixing.writes import (
        inside,
        outside_tree_error,
        remove_stale_temps,
        tree_roots,
        write_if_unchanged,
    )
    from offlint.pipeline.check import read_file

    cwd = Path.cwd().resolve()
    overrides = SelectionOverrides(select=select, ignore=ignore)
    results: list[FileFix] = []
    run_errors: list[FileError] = []
    written: set[str] = set()
    try:
        if select is not None and not select:  # as `check`: no rule would run, and "nothing to fix"
            raise ConfigError("--select: an empty selection runs no rule (name rule codes, or ALL)")
        catalogue = load_catalogue()
        codes = sorted(set(catalogue) | set(FIXABLE_RULES))
        defaults = sorted(
            {c for c, s in catalogue.items() if s.default_enabled} | set(FIXABLE_RULES)
        )
        finder = ConfigFinder(config_file, fallback_root=cwd)
        files, run_errors = discover(list(paths), finder, cwd)
        roots = tree_roots(paths)
        if apply:
            # only in folders of the tree: a link's target folder elsewhere is not ours to clean
            remove_stale_temps(sorted({Path(f.real).parent for f in files if inside(f.real, roots)}))
        for found in files:
            config = finder.for_real_file(found.real)  # no stat: a folder without x must not raise
            chosen = strategy or str(config.fix.get("strategy", "auto"))
            if chosen not in STRATEGIES:
                raise ConfigError(
                    f"{config.source}: [tool.offlint.fix] strategy must be one of {', '.join(STRATEGIES)}"
                )
            try:  # the flag, else the config; None: on where the module uses torch.compile
                safe = compile_safe if compile_safe is not None else parse_setting(
                    config.fix.get("compile-safe", COMPILE_SAFE_AUTO)
                )
            except ValueError as exc:
                raise ConfigError(f"{config.source}: [tool.offlint.fix] {exc}") from None
            settings = FixSettings(
                select=resolve_selection(config, overrides, codes, defaults, found.path),
                strategy=chosen,
                compile_safe=safe,
                capture_reachable=tuple(config.capture_reachable),
                min_confidence=Confidence(min_confidence or config.min_confidence or DEFAULT_MIN_CONFIDENCE.value),
            )
            if apply and not inside(found.real, roots):
                run_errors.append(outside_tree_error(found.display, found.real))
                continue
            data = read_file(found)
            if isinstance(data, FileError):
                run_errors.append(data)
                continue
            result = fix_source(data, found.display, settings)
            results.append(result)
            if apply and result.changed:
                # also when some fix was dropped: what is left is still valid code
                error = write_if_unchanged(found.path, found.display, data, result.fixed, roots)
                if error is None:
                    written.add(found.display)
                else:
                    result.errors.append(error)
    except (ConfigError, CatalogueError) as exc:
        click.echo(f"offlint: error: {exc}", err=True)
        return EXIT_ERROR

    errors = run_errors + [e for r in results for e in r.errors]
    changed = [r for r in results if r.changed]
    if output_format == "json":
        payload = {
            "files": [
                {
                    "path": printable(r.path),
                    "changed": r.changed,
                    "written": r.path in written,
                    "strategies": sorted(set(r.strategies)),
                    "edits": [e.as_json() for e in r.edits],
                    "notes": r.notes,
                    "remaining": [
                        {"code": d.code, "line": d.location.line, "message": d.message}
                        for d in r.remaining
                    ],
                    "not_fixed": [
                        {"code": n.diagnostic.code, "line": n.diagnostic.location.line, "reason": n.reason}
                        for n in r.not_fixed
                    ],
                    "left": [
                        {"code": d.code, "line": d.location.line, "confidence": d.confidence.value}
                        for d in r.left
                    ],
                    "errors": [
                        {"kind": e.kind.value, "message": e.message, "line": e.line}
                        for e in r.errors
                    ],
                    **(
                        {"diff": unified_diff(printable(r.path), r.original, r.fixed)}
                        if show_diff and r.changed
                        else {}
                    ),
                }
                for r in results
                if r.changed or r.errors or r.notes or r.remaining or r.left or r.not_fixed
            ],
            "errors": [
                {"path": printable(e.path), "kind": e.kind.value, "message": printable(e.message)}
                for e in run_errors
            ],
            "summary": {
                "files": len(results),
                "changed": len(changed),
                "written": len(written),
                "edits": sum(len(r.edits) for r in results),
            },
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        for r in changed:
            if show_diff:
                click.echo(unified_diff(printable(r.path), r.original, r.fixed, color=color), nl=False)
        _text_summary(results, run_errors, written, apply)
    if errors:
        return EXIT_ERROR
    if not apply:
        return EXIT_CHANGES if changed else EXIT_CLEAN
    # after --apply, as `ruff check --fix`: a hazard left fails the run (the CI line)
    if any(r.left for r in results) and not exit_zero:
        return EXIT_CHANGES
    if exit_non_zero_on_fix and written:
        return EXIT_CHANGES
    return EXIT_CLEAN


def _text_summary(
    results: list, run_errors: list[FileError], written: set[str], apply: bool
) -> None:
    for r in results:
        for edit in r.edits:
            rules = ", ".join((edit.rule, *edit.also_fixes))
            click.echo(
                f"{printable(r.path)}:{edit.line}: {rules} [{edit.safety.value}] {edit.title}", err=True
            )
        for note in r.notes:
            click.echo(f"{printable(r.path)}: note: {note}", err=True)
        explained = {(n.diagnostic.code, n.diagnostic.location.line) for n in r.not_fixed}
        for n in r.not_fixed:
            where = f"{printable(r.path)}:{n.diagnostic.location.line}"
            click.echo(f"{where}: {n.diagnostic.code} not fixed: {n.reason}", err=True)
        for d in r.remaining:
            if (d.code, d.location.line) not in explained:
                click.echo(f"{printable(r.path)}:{d.location.line}: {d.code} not fixed: {d.message}", err=True)
    for error in run_errors + [e for r in results for e in r.errors]:
        click.echo(f"offlint: error: {printable(error.one_line())}", err=True)
    changed = [r for r in results if r.changed]
    edits = sum(len(r.edits) for r in changed)
    if apply:
        click.echo(f"Fixed {len(written)} file(s) ({edits} edit(s)).", err=True)
        left = sum(len(r.left) for r in results)
        if left:
            click.echo(f"{left} hazard(s) left after fixing (`offlint check` lists them).", err=True)
    elif changed:
        click.echo(
            f"Would fix {len(changed)} file(s) ({edits} edit(s)); run with --apply to write.",
            err=True,
        )
    else:
        click.echo("Nothing to fix.", err=True)
