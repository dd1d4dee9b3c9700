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
    from offlint.analysis.callgraph import Seed
    from offlint.analysis.engine import FileSettings
    from offlint.config import ConfigFinder, SelectionOverrides
    from offlint.diagnostics import Diagnostic
    from offlint.fixing.apply import FileFix, FixSettings
    from offlint.fixing.edits import Edit

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
    from offlint.config import ConfigError, ConfigFinder, SelectionOverrides
    from offlint.discovery import discover
    from offlint.fixing.apply import FIXABLE_RULES, FileFix, left_after
    from offlint.fixing.diffs import unified_diff
    from offlint.fixing.loop import fix_source
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
    # each file's settings with the withheld rules (`not_fixed_codes`) that its selection holds:
    # a diff that changes nothing says how many fixes were withheld, never "Nothing to fix."
    withheld_settings: dict[str, FixSettings] = {}
    selections: dict[str, frozenset[str]] = {}
    file_settings: dict[str, FixSettings] = {}
    try:
        if select is not None and not select:  # as `check`: no rule would run, and "nothing to fix"
            raise ConfigError("--select: an empty selection runs no rule (name rule codes, or ALL)")
        load_catalogue()  # a broken catalogue is one error line before any file is read
        finder = ConfigFinder(config_file, fallback_root=cwd)

        def settings_for(
            path: Path,
            seeds: tuple[Seed, ...] = (),
            segmented: bool = False,
            real: str | None = None,
            hints: tuple[tuple[str, str, str], ...] = (),
        ) -> FixSettings:
            # the whole selection is kept (`selections`): a diff that changes nothing says how many
            # fixes of the withheld rules it holds
            full = fix_settings(
                finder,
                overrides,
                path,
                strategy=strategy,
                compile_safe=compile_safe,
                min_confidence=min_confidence,
                seeds=seeds,
                segmented=segmented,
                real=real,
                hints=hints,
            )
            selections[str(path)] = full.select
            return dataclasses.replace(full, select=full.select - set(not_fixed_codes))

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
            withheld = sum(1 for d in result.left if d.code in not_fixed_codes and d.fixable)
            reported = _reported({result.path: settings}, [result])
            return _fix_stdin(
                result,
                diff=show_diff and not apply,
                color=color,
                exit_zero=exit_zero,
                withheld=withheld,
                reported=reported,
            )
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
                found.path,
                facts.seeds if facts else (),
                bool(facts and facts.segmented_capture),
                found.real,
                facts.hints if facts else (),
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
            file_settings[result.path] = settings
            if not_fixed_codes:
                chosen = selections.get(str(found.path), frozenset()) & set(not_fixed_codes)
                withheld_settings[result.path] = dataclasses.replace(settings, select=frozenset(chosen))
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
        withheld = 0
        if not apply and not changed and not errors and not_fixed_codes:
            withheld = _withheld_fixes(results, withheld_settings)
        _text_summary(results, run_errors, written, apply, apply_hint, withheld, _reported(file_settings, results))
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


def fix_settings(
    finder: ConfigFinder,
    overrides: SelectionOverrides,
    path: Path,
    *,
    strategy: str | None = None,
    compile_safe: bool | None = None,
    min_confidence: str | None = None,
    not_fixed_codes: tuple[str, ...] = (),
    seeds: tuple[Seed, ...] = (),
    segmented: bool = False,
    real: str | None = None,
    hints: tuple[tuple[str, str, str], ...] = (),
) -> FixSettings:
    """What `fix` fixes `path` with: its config's selection (every fixable rule's too), strategy
    and compile-safe setting, the floor, and what `check` learnt of it from the whole tree.
    `not_fixed_codes`: rules reported but not fixed (the unsafe ones of `check --fix`)."""
    from offlint.catalogue import load_catalogue
    from offlint.config import ConfigError, resolve_selection
    from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE, Confidence
    from offlint.fixing.apply import FIXABLE_RULES, FixSettings
    from offlint.fixing.capture_modes import CAPTURE_MODES
    from offlint.fixing.compile_safe import AUTO as COMPILE_SAFE_AUTO
    from offlint.fixing.compile_safe import parse_setting
    from offlint.fixing.offloader_rewrite import STRATEGIES

    catalogue = load_catalogue()
    codes = sorted(set(catalogue) | set(FIXABLE_RULES))
    defaults = sorted({c for c, s in catalogue.items() if s.default_enabled} | set(FIXABLE_RULES))
    # by the resolved path where there is one (no stat: a folder without x must not raise)
    config = finder.for_real_file(real) if real is not None else finder.for_path(path)
    chosen = strategy or str(config.fix.get("strategy", "auto"))
    if chosen not in STRATEGIES:
        raise ConfigError(f"{config.source}: [tool.offlint.fix] strategy must be one of {', '.join(STRATEGIES)}")
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
        hints=hints,
        capture_modes=config.capture_modes or CAPTURE_MODES,
    )


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


def _withheld_fixes(results: list[FileFix], settings: dict[str, FixSettings]) -> int:
    """How many findings of the withheld rules (the unsafe ones `check --diff` leaves out, as far
    as each file's selection holds them: `settings`) have a fix."""
    from offlint.fixing.apply import left_after

    count = 0
    for r in results:
        only = settings.get(r.path)
        if only is not None and only.select:
            count += sum(1 for d in left_after(r.original, r.path, only) if d.fixable)
    return count


def _reported(settings: dict[str, FixSettings], results: list[FileFix]) -> dict[str, list[Diagnostic]]:
    """The findings `check` reports on each changed file as it was read: what its edits are
    labelled with (an edit also fixing a code that was never reported is not labelled with it)."""
    from offlint.fixing.apply import left_after

    found: dict[str, list[Diagnostic]] = {}
    for r in results:
        chosen = settings.get(r.path)
        if r.edits and chosen is not None:
            try:
                found[r.path] = left_after(r.original, r.path, chosen)
            except Exception:  # the labels are a courtesy: never lose the listing over them
                continue
    return found


def _edit_label(edit: Edit, reported: list[Diagnostic] | None) -> str:
    """`OFL101 (161:9), OFL103 (149:9)`: the reported findings an edit fixes, by code and place;
    the fixer's own codes where the file's findings are not known."""
    codes = (edit.rule, *edit.also_fixes)
    if reported is None:
        return ", ".join(codes)
    labels = [
        f"{code} ({', '.join(d.position for d in reported if d.code == code)})"
        for code in dict.fromkeys(codes)
        if any(d.code == code for d in reported)
    ]
    return ", ".join(labels) or f"{edit.rule} (a companion edit: no finding of its own)"


def _fix_stdin(
    result: FileFix,
    *,
    diff: bool,
    color: bool,
    exit_zero: bool,
    withheld: int = 0,
    reported: dict[str, list[Diagnostic]] | None = None,
) -> int:
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
    _listing([result], [], reported)
    for d in result.left:
        click.echo(f"{printable(result.path)}:{d.location.line}:{d.location.column}: {d.code} {d.message}", err=True)
    edits = len(result.edits)
    if result.changed:
        verb = "Would fix" if diff else "Fixed"
        click.echo(f"{verb} {edits} edit{'s' if edits != 1 else ''} in {printable(result.path)}.", err=True)
    elif not result.errors:
        click.echo(_nothing_to_fix(withheld), err=True)
    if result.errors:
        return EXIT_ERROR
    if diff:
        return EXIT_CHANGES if result.changed else EXIT_CLEAN
    return EXIT_CHANGES if result.left and not exit_zero else EXIT_CLEAN


def _listing(
    results: list[FileFix], run_errors: list[FileError], reported: dict[str, list[Diagnostic]] | None = None
) -> None:
    """Each edit made (labelled with the reported findings it fixes), each note, each finding a
    fixer left with its reason, each error (stderr)."""
    for r in results:
        for edit in r.edits:
            rules = _edit_label(edit, reported.get(r.path) if reported is not None else None)
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
                click.echo(f"{printable(r.path)}:{d.location.line}: {d.code} not fixed: {_unexplained(d.code)}", err=True)
    for error in run_errors + [e for r in results for e in r.errors]:
        click.echo(f"offlint: error: {printable(error.one_line())}", err=True)


def _unexplained(code: str) -> str:
    """Why a finding with a fix is left when no fixer said why: the reason, never the finding
    again (its message is `check`'s to show)."""
    from offlint.fixing.apply import FIXABLE_RULES

    if code not in FIXABLE_RULES:
        return f"its rule has no automatic fix (`offlint rule {code}` shows what to write instead)"
    return (
        f"no fix of {code} applies to this code as written (its fixers rewrite the shapes "
        f"`offlint rule {code}` shows; this one is left for a hand edit)"
    )


def _nothing_to_fix(withheld: int) -> str:
    """The closing line of a run that changes nothing: "Nothing to fix." only when that is so."""
    if not withheld:
        return "Nothing to fix."
    noun = "finding has an unsafe fix" if withheld == 1 else "findings have unsafe fixes"
    return f"No safe fixes; {withheld} {noun} (`offlint check --diff --unsafe-fixes` shows them)."


def _text_summary(
    results: list[FileFix],
    run_errors: list[FileError],
    written: set[str],
    apply: bool,
    apply_hint: str,
    withheld: int = 0,
    reported: dict[str, list[Diagnostic]] | None = None,
) -> None:
    _listing(results, run_errors, reported)
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
    elif run_errors or any(r.errors for r in results):
        failed = len({e.path for e in run_errors} | {r.path for r in results if r.errors})
        click.echo(f"Nothing fixed: {failed} file(s) could not be fixed (the errors above).", err=True)
    else:
        click.echo(_nothing_to_fix(withheld), err=True)
