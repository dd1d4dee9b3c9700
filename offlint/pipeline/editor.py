"""The pipeline behind `offlint server` (the editor): `check` and `fix` on unsaved buffers.

Nothing here analyses anything itself: every diagnostic comes from `check.py`'s functions, the
same ones `offlint check` runs, with the editor's unsaved text in place of the file on disk.

- `check_project`: `offlint check FOLDER` with the open buffers as overlays: discovery, the
  configuration of each file, the cache, the cross-module rounds and fix confirmation. What CI
  would report if the buffers were saved. The server runs it in a process of its own when a
  buffer is opened or saved, when the configuration changes, and when typing pauses.
- `check_buffer`: one buffer, with the settings (cross-module seeds included) the last project
  run analysed its file with: the fast pass on every edit. Fix confirmation (a libcst parse,
  seconds for a large file) is left to the project run: its diagnostics are the same, only
  their fixes unconfirmed.
- `suppressed_text`, `fixed_text`: the "suppress" and "fix all" actions, as `check --add-noqa`
  and `check --fix -` (stdin) compute them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from offlint.config import Config, ConfigFinder, SelectionOverrides
from offlint.diagnostics import FileError, FileReport
from offlint.pipeline.check import (
    CheckOptions,
    below_floor_hidden,
    check_paths,
    guarded_check,
    settings_for,
)

if TYPE_CHECKING:
    from offlint.analysis.engine import FileSettings




@dataclass
class ProjectCheck:
    """One run of `check` over a folder (or one file), keyed by resolved path."""

    reports: dict[str, FileReport] = field(default_factory=dict)
    settings: dict[str, FileSettings] = field(default_factory=dict)
    errors: list[FileError] = field(default_factory=list)  # the run's own (a folder unreadable)


def check_project(root: str, overlays: Mapping[str, bytes], use_cache: bool = True) -> ProjectCheck:
    """`offlint check ROOT` run from ROOT (from its folder when ROOT is a file), the buffers of
    `overlays` (resolved path -> text) checked as if saved. Raises ConfigError on a broken
    configuration, as `check` does. Serial (`-j1`): the server's process holds threads."""
    path = Path(root)
    cwd = path if path.is_dir() else path.parent
    analysed: dict[str, FileSettings] = {}
    real_paths: dict[str, str] = {}
    # where `check` keeps it: OFFLINT_CACHE_DIR (its --cache-dir), else the project root's
    cache_dir = os.environ.get("OFFLINT_CACHE_DIR")
    report = check_paths(
        CheckOptions(
            paths=(path,),
            cwd=cwd,
            jobs=1,
            use_cache=use_cache,
            cache_dir=Path(cache_dir) if cache_dir else None,
            overlays=dict(overlays),
            analysed_with=analysed,
            real_paths=real_paths,
        )
    )
    found = ProjectCheck(errors=list(report.errors))
    for file_report in report.files:
        real = real_paths.get(file_report.path)
        if real is None:
            continue
        found.reports[real] = file_report
        if file_report.path in analysed:
            found.settings[real] = analysed[file_report.path]
    return found


class BufferSettings:
    """The settings of buffers below one folder, from the configuration `check` would use (the
    closest `.offlint.toml`, `offlint.toml` or `pyproject.toml` with `[tool.offlint]`). A new one
    is made when a configuration file changes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.finder = ConfigFinder(None, fallback_root=root)

    def config(self, path: Path) -> Config:
        return self.finder.for_path(path)

    def settings(self, path: Path) -> FileSettings:
        """Raises ConfigError (a bad selection in the config file), as `check` would."""
        return settings_for(self.finder.for_path(path), SelectionOverrides(), path)

    def excluded(self, path: Path) -> bool:
        """Whether `check` skips the file: an `exclude` glob matches it (or a folder holding it
        below the config's root), as with `--force-exclude`."""
        # an editor names every file it opens: as ruff's server, it leaves out what `exclude`
        # matches (what `--force-exclude` does on the command line)
        config = self.finder.for_path(path)
        return config.is_excluded(path)


def check_buffer(text: str, display: str, settings: FileSettings, *, confirm_fixes: bool = False) -> FileReport:
    """One buffer's report, findings under the floor hidden, as `check -` reports the same text
    with the same settings (without fix confirmation unless asked for)."""
    report = guarded_check(text.encode("utf-8"), display, settings, confirm_fixes=confirm_fixes)
    return below_floor_hidden(report, settings)


def notebook_bytes(cells: Sequence[tuple[bool, str]]) -> bytes:
    """An `.ipynb` holding the cells (is code, text) in order, as the editor shows them: what
    `check` reads from a notebook file, built from an editor's notebook document."""
    document = {
        "cells": [
            {
                "cell_type": "code" if code else "markdown",
                "metadata": {},
                "source": text,
                **({"outputs": [], "execution_count": None} if code else {}),
            }
            for code, text in cells
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(document).encode("utf-8")


def suppressed_text(text: str, wanted: dict[int, set[str]]) -> str | None:
    """`text` with `# offlint: ignore[CODE]` covering each (line, codes) of `wanted`, placed as
    `check --add-noqa` places it; None when no directive could be placed."""
    from offlint.pipeline.add_noqa import with_suppressions

    result = with_suppressions(text, wanted)
    return result.text if result.added and result.text != text else None


def fixed_text(
    text: str,
    display: str,
    path: Path,
    root: Path,
    settings: FileSettings | None = None,
    *,
    unsafe: bool = False,
) -> str | None:
    """`text` after `offlint check --fix -` (`--unsafe-fixes` with `unsafe`): the fixes of the
    findings `check` shows, applied to convergence by `fix`'s engine; None when nothing changes
    or the fixed text is not valid. `settings`: what the project run knew of the file (the
    seeds other modules give it), so that `fix` sees the findings `check` showed."""
    from offlint.catalogue import load_catalogue
    from offlint.fixing.loop import fix_source
    from offlint.pipeline.fix import fix_settings

    not_fixed = () if unsafe else tuple(
        code for code, spec in load_catalogue().items() if spec.fix_safety.value != "safe"
    )
    fix_with = fix_settings(
        ConfigFinder(None, fallback_root=root),
        SelectionOverrides(),
        path,
        not_fixed_codes=not_fixed,
        seeds=settings.seeds if settings is not None else (),
        segmented=bool(settings and settings.segmented_capture),
        real=os.path.realpath(path),
    )
    result = fix_source(text.encode("utf-8"), display, fix_with)
    if result.errors or not result.changed:
        return None
    return result.fixed.decode("utf-8")
