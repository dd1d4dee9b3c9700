"""The fix pipeline (`offlint fix`, `check --fix`): which files, which settings, the fixes, the
writes, the report and the exit code.

Exit codes: 2 when any file could not be read, parsed, fixed or written (the others are still
fixed); otherwise, without `--apply`, 1 when something would change and 0 when nothing would;
with `--apply`, 1 while hazards remain (unless `--exit-zero`), else 0.

With `--apply`, writes stay inside the tree named on the command line (`writes.py`), and the
temporary files a killed run left next to the files it fixes are removed first.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from offlint.diagnostics import FileError, FileReport
from offlint.notebooks import NOTEBOOK_NOT_FIXABLE, is_notebook
from offlint.pipeline.processes import ends_with_the_run
from offlint.reporting._sources import printable

if TYPE_CHECKING:
    from offlint.analysis.engine import FileSettings
    from offlint.config import SelectionOverrides
    from offlint.fixing.apply import FileFix

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
    apply_hint: str = "--apply",
    stdin_filename: str | None = None,
    not_fixed_codes: tuple[str, ...] = (),
) -> int:
    """`offlint fix` (and `check --fix/--diff`) on `paths`; `-` alone: the source on stdin, fixed
    to stdout (`apply_hint`: the option that writes what a diff shows, named in its closing line;
    `not_fixed_codes`: rules reported but not fixed, the unsafe ones of `check --fix`)."""
    from offlint.catalogue import CatalogueError, load_catalogue
    from offlint.config import ConfigError, ConfigFinder, SelectionOverrides, resolve_selection
    from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE, Confidence
    from offlint.discovery import discover
    from offlint.fixing.apply import FIXABLE_RULES, FileFix, FixSettings, fix_source, left_after
    from offlint.fixing.capture_modes import CAPTURE_MODES
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

    if TYPE_CHECKING:
        from offlint.analysis.callgraph import Seed

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

        def settings_for(
            path: Path, seeds: tuple[Seed, ...] = (), segmented: bool = False, real: str | None = None
        ) -> FixSettings:
            # by the resolved path where there is one (no stat: a folder without x must not raise)
            config = finder.for_real_file(real) if real is not None else finder.for_path(path)
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
            return FixSettings(
                select=resolve_selection(config, overrides, codes, defaults, path) - set(not_fixed_codes),
                strategy=chosen,
                compile_safe=safe,
                capture_reachable=tuple(config.capture_reachable),
                min_confidence=Confidence(min_confidence or config.min_confidence or DEFAULT_MIN_CONFIDENCE.value),
                seeds=seeds,
                segmented_capture=segmented,
                capture_modes=config.capture_modes or CAPTURE_MODES,
            )

        if any(str(p) == "-" for p in paths):
            if len(paths) > 1:
                raise ConfigError("`-` (stdin) cannot be combined with other paths")
            # as `check -`: the name (and the config that applies) from --stdin-filename
            where = Path(stdin_filename) if stdin_filename else cwd / "stdin.py"
            data = sys.stdin.buffer.read()
            settings = settings_for(where)
            result = fix_source(data, stdin_filename or "-", settings)
            if not_fixed_codes and not result.errors:
                # what is left is every selected rule's, the ones not fixed included
                shown = dataclasses.replace(settings, select=settings.select | set(not_fixed_codes))
                result.left = left_after(result.fixed, result.path, shown)
            return _fix_stdin(result, diff=show_diff and not apply, color=color, exit_zero=exit_zero)
        files, run_errors = discover(list(paths), finder, cwd)
        roots = tree_roots(paths)
        tree_overrides = dataclasses.replace(overrides, min_confidence=min_confidence)
        tree, shown_in_tree = _tree_facts(paths, config_file, tree_overrides) if len(files) > 1 else ({}, {})
        if apply:
            # only in folders of the tree: a link's target folder elsewhere is not ours to clean
            remove_stale_temps(sorted({Path(f.real).parent for f in files if inside(f.real, roots)}))
        for found in files:
            if is_notebook(found.display):
                # fixes are planned on a module's rows, a notebook's are its cells': left as is
                click.echo(f"offlint: note: {printable(found.display)}: {NOTEBOOK_NOT_FIXABLE}", err=True)
                continue
            facts = tree.get(found.display)
            settings = settings_for(
                found.path, facts.seeds if facts else (), bool(facts and facts.segmented_capture), found.real
            )
            if apply and not inside(found.real, roots):
                run_errors.append(outside_tree_error(found.display, found.real))
                continue
            seen = shown_in_tree.get(found.display)
            if seen is not None and not seen.errors and not any(d.code in FIXABLE_RULES for d in seen.diagnostics):
                # check's pass over the tree showed nothing a fix acts on here: nothing to do
                # (fixing each of sglang's 4 719 files again cost 5x the check)
                results.append(FileFix(path=found.display, original=b"", fixed=b"", left=list(seen.diagnostics)))
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
                # color=: click strips escape codes from non-terminals, which would undo --color
                click.echo(unified_diff(printable(r.path), r.original, r.fixed, color=color), nl=False, color=color)
        _text_summary(results, run_errors, written, apply, apply_hint)
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


def _tree_facts(
    paths: tuple[Path, ...], config_file: Path | None, overrides: SelectionOverrides
) -> tuple[dict[str, FileSettings], dict[str, FileReport]]:
    """What `check` learns from the whole tree about each file (the functions other modules'
    capture regions reach, segmented capture): a finding `check` shows because another module
    reaches it is one `fix` sees too. `check`'s own run, with its cache and workers; and what it
    showed in each file (at `fix`'s floor), so that a file with nothing to fix is not analysed again."""
    from offlint.pipeline.check import CheckOptions, check_paths

    facts: dict[str, FileSettings] = {}
    report = check_paths(CheckOptions(paths=paths, overrides=overrides, config_file=config_file, analysed_with=facts))
    return facts, {f.path: f for f in report.files}


def _fix_stdin(result: FileFix, *, diff: bool, color: bool, exit_zero: bool) -> int:
    """`fix -` / `check --fix -`: the fixed source (or, with `--diff`, the diff) on stdout, for an
    editor to replace its buffer with; what was fixed and every finding left on stderr. A source
    that could not be fixed comes back as it was read. Exit 2 on an error, 1 while findings are
    left (unless `exit_zero`), else 0."""
    from offlint.fixing.diffs import unified_diff

    if diff:
        if result.changed:
            click.echo(unified_diff(printable(result.path), result.original, result.fixed, color=color), nl=False, color=color)
    else:
        sys.stdout.buffer.write(result.fixed)
        sys.stdout.buffer.flush()
    _listing([result], [])
    for d in result.left:
        click.echo(f"{printable(result.path)}:{d.location.line}:{d.location.column}: {d.code} {d.message}", err=True)
    edits = len(result.edits)
    if result.changed:
        verb = "Would fix" if diff else "Fixed"
        click.echo(f"{verb} {edits} edit{'s' if edits != 1 else ''} in {printable(result.path)}.", err=True)
    elif not result.errors:
        click.echo("Nothing to fix.", err=True)
    if result.errors:
        return EXIT_ERROR
    if diff:
        return EXIT_CHANGES if result.changed else EXIT_CLEAN
    return EXIT_CHANGES if result.left and not exit_zero else EXIT_CLEAN


def _listing(results: list[FileFix], run_errors: list[FileError]) -> None:
    """Each edit made, each note, each finding a fixer left with its reason, each error (stderr)."""
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


def _text_summary(
    results: list[FileFix], run_errors: list[FileError], written: set[str], apply: bool, apply_hint: str
) -> None:
    _listing(results, run_errors)
    changed = [r for r in results if r.changed]
    edits = sum(len(r.edits) for r in changed)
    if apply:
        click.echo(f"Fixed {len(written)} file(s) ({edits} edit(s)).", err=True)
        left = sum(len(r.left) for r in results)
        if left:
            click.echo(f"{left} hazard(s) left after fixing (`offlint check` lists them).", err=True)
    elif changed:
        click.echo(
            f"Would fix {len(changed)} file(s) ({edits} edit(s)); run with {apply_hint} to write.",
            err=True,
        )
    else:
        click.echo("Nothing to fix.", err=True)
