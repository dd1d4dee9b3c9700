"""Renderers: views of the one diagnostic model (`offlint.diagnostics`), never a second model.

`render` returns exactly what goes to stdout (or `-o FILE`); anything for humans about the run
itself (counts, files that could not be checked) comes from `summary` and goes to stderr.
Every view lists diagnostics in `RunReport.diagnostics` order: (path, line, column, code).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from offlint.diagnostics import RunReport
from offlint.reporting.summary import render_counts, render_run_errors, render_summary

if TYPE_CHECKING:
    from offlint.catalogue import RuleSpec

OUTPUT_FORMATS = (
    "full",
    "concise",
    "grouped",
    "json",
    "offlint-json",
    "json-lines",
    "sarif",
    "github",
    "gitlab",
    "junit",
    "pylint",
    "rdjson",
    "azure",
)

__all__ = [
    "OUTPUT_FORMATS",
    "render",
    "render_counts",
    "render_run_errors",
    "render_statistics",
    "render_summary",
]


def render(
    report: RunReport,
    output_format: str,
    *,
    root: Path,
    color: bool,
    show_fixes: bool = True,
    sources: Mapping[str, str] | None = None,
    catalogue: Mapping[str, RuleSpec] | None = None,
    project_root: Path | None = None,
    docs_url: str | None = None,
) -> str:
    """The report in `output_format`, as the text to write to stdout or `-o FILE`.

    `sources` (path -> text) spares the full and sarif views a re-read of files the caller has
    in memory; `catalogue` defaults to the shipped rule catalogue (SARIF lists its rules).
    `color` only affects `full`; machine formats are never coloured. `root` is the folder the
    report's relative paths start from (the working directory); `docs_url` is the `docs-url`
    setting rule links start from (`links.py`; None: the bundled docs); the formats CI systems attach
    to a repository (github, gitlab) give paths from the repository root instead: git's top
    level above `root`, else `project_root`, else `root`.
    """
    if output_format == "full":
        if not report.diagnostics:
            return ""  # nothing to frame: spare the run rich's import (a cached run's main cost)
        from offlint.reporting.full import render_full

        return render_full(report, root=root, color=color, show_fixes=show_fixes, sources=sources)
    # each view is imported when asked for: a warm run pays for the one it prints
    if output_format == "concise":
        from offlint.reporting.concise import render_concise

        return render_concise(report, root=root, show_fixes=show_fixes)
    if output_format == "grouped":
        from offlint.reporting.grouped import render_grouped

        return render_grouped(report, root=root, show_fixes=show_fixes)
    if output_format == "json":
        from offlint.reporting.ruff_json import render_ruff_json

        return render_ruff_json(report, root=root, docs_url=docs_url)
    if output_format == "offlint-json":
        from offlint.reporting.json_format import render_json

        return render_json(report, root=root)
    if output_format == "rdjson":
        from offlint.reporting.rdjson import render_rdjson

        return render_rdjson(report, root=root, docs_url=docs_url)
    if output_format == "azure":
        from offlint.reporting.azure import render_azure

        return render_azure(report, root=root)
    if output_format == "sarif":
        from offlint.catalogue import load_catalogue
        from offlint.reporting.sarif import render_sarif

        specs = load_catalogue() if catalogue is None else catalogue
        return render_sarif(report, root=root, catalogue=specs, sources=sources, docs_url=docs_url)
    if output_format == "github":
        from offlint.reporting.github import render_github

        return render_github(report, root=root, project_root=project_root)
    if output_format == "json-lines":
        from offlint.reporting.json_lines import render_json_lines

        return render_json_lines(report, root=root)
    if output_format == "pylint":
        from offlint.reporting.pylint import render_pylint

        return render_pylint(report, root=root)
    if output_format == "gitlab":
        from offlint.reporting.gitlab import render_gitlab

        return render_gitlab(report, root=root, project_root=project_root, sources=sources)
    if output_format == "junit":
        from offlint.reporting.junit import render_junit

        return render_junit(report, root=root)
    raise ValueError(f"unknown output format {output_format!r}; expected one of {OUTPUT_FORMATS}")


def render_statistics(report: RunReport, output_format: str = "full") -> str:
    """`--statistics`: counts per code; JSON when the output format is json, else a table."""
    from offlint.reporting.statistics import render_statistics_json, render_statistics_text

    if output_format in ("json", "offlint-json"):
        return render_statistics_json(report)
    return render_statistics_text(report)
