"""`--output-format sarif`: SARIF 2.1.0 for GitHub code scanning and other SARIF consumers.

One run. `tool.driver.rules` lists every rule of the catalogue (plus, defensively, any code a
diagnostic carries that the catalogue lacks), so `ruleIndex` is stable across runs of the same
version; a rule's full help (its page as Markdown) is embedded once, in its descriptor, and only
for the rules that fired: the others carry their summary and `helpUri`. Results carry `partialFingerprints["offlintFingerprint/v1"]`: a hash of the code, the
path, the whitespace-normalised source line and the occurrence index among identical triples.
No line number goes into it, so moving code up or down keeps a finding's identity.
Files that could not be checked become `invocations[0].toolExecutionNotifications`, and
`executionSuccessful` is false when there is any.

Artifact URIs are relative to the repository root (the nearest folder above the working directory
that holds `.git`, else the working directory), under the base `%SRCROOT%` that
`originalUriBaseIds` maps to that folder: GitHub code scanning matches such paths against the
checked-out repository whatever folder the check ran from. A file outside the root gets an
absolute `file:` URI instead. Either way the path is percent-encoded byte by byte (RFC 3986), so
any file name, undecodable or with a newline, is a valid URI; the fingerprint hashes the printable
name (`display_path`). Each rule's `helpUri` is its page under `docs-url` (`links.py`: by default
the docs installed with offlint, generated from rules/*.toml by docs/rules/generate.py).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from hashlib import sha256
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

import offlint
from offlint.catalogue import RuleSpec
from offlint.diagnostics import Confidence, Diagnostic, FixSafety, RunReport
from offlint.links import docs_base, rule_help_line, rule_url
from offlint.reporting._sources import SourceCache, display_path, relative_path, repository_root
from offlint.reporting.json_format import dumps

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL_NAME = "offlint"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "offlintFingerprint/v1"
# confidence as SARIF's level and rank (0-100): code scanning sorts and filters by them
_LEVEL = {Confidence.HIGH: "error", Confidence.MEDIUM: "warning", Confidence.LOW: "note"}
_RANK = {Confidence.HIGH: 90.0, Confidence.MEDIUM: 60.0, Confidence.LOW: 30.0}


# the sections of a rule's page a code-scanning alert shows; the examples and references stay
# behind the reference (`helpUri`, `offlint rule CODE`)
HELP_SECTIONS = ("why", "fix_safety")


def help_markdown(spec: RuleSpec) -> str:
    """The help a fired rule carries: its summary, why it matters and how safe its fix is, then
    where the whole page is (what exactly it checks, examples, references)."""
    from offlint.catalogue import DOC_HEADINGS

    out = [f"# {spec.name} ({spec.code})", "", spec.summary, ""]
    for key in HELP_SECTIONS:
        text = spec.docs.get(key, "").strip()
        if text:
            out += [f"## {DOC_HEADINGS[key]}", "", text, ""]
    out += [f"What it checks exactly, examples and references: `{rule_help_line(spec.code)}`."]
    return "\n".join(out) + "\n"


def rule_descriptor(spec: RuleSpec, *, fired: bool = True, docs_url: str | None = None) -> dict[str, Any]:
    """A rule's `reportingDescriptor`, once per rule: its help (why, fix safety) only when it
    `fired` in this run; the whole page by reference (`helpUri`, `offlint rule CODE`)."""
    descriptor: dict[str, Any] = {"id": spec.code, "name": spec.name}
    if fired:
        descriptor["shortDescription"] = {"text": spec.summary}
    url = rule_url(spec.code, docs_url)
    if url is not None:
        descriptor["helpUri"] = url
    if not fired:
        # listed for a stable `ruleIndex`; the rest is one reference away
        descriptor["properties"] = {"fixSafety": spec.fix_safety.value}
        return descriptor
    descriptor["help"] = {"text": f"Documentation: `{rule_help_line(spec.code)}`.", "markdown": help_markdown(spec)}
    descriptor["defaultConfiguration"] = {"enabled": spec.default_enabled, "level": "error"}
    descriptor["properties"] = {
        "fixSafety": spec.fix_safety.value,
        "prevents": spec.prevents,
        "tags": ["cuda-graphs", spec.family],
    }
    return descriptor


def _unknown_rule_descriptor(diagnostic: Diagnostic) -> dict[str, Any]:
    """For a code the catalogue lacks (a plugin, a stale cache): what the diagnostic itself says."""
    return {
        "id": diagnostic.code,
        "name": diagnostic.name,
        "shortDescription": {"text": diagnostic.name},
        "defaultConfiguration": {"level": "error"},
        "properties": {"fixSafety": diagnostic.fix_safety.value},
    }


def normalize_source_line(text: str) -> str:
    """Whitespace-insensitive: re-indenting code must not make it a new finding."""
    return " ".join(text.split())


def fingerprints(diagnostics: list[Diagnostic], root: Path, sources: SourceCache) -> list[str]:
    """One stable fingerprint per diagnostic, in the same order."""
    seen: Counter[tuple[str, str, str]] = Counter()
    found = []
    for diagnostic in diagnostics:
        line = diagnostic.source_line.splitlines()[0] if diagnostic.source_line.strip() else None
        if line is None:
            line = sources.line(diagnostic.path, diagnostic.location.line, diagnostic.cell) or ""
        key = (diagnostic.code, display_path(diagnostic.path, root), normalize_source_line(line))
        occurrence = seen[key]
        seen[key] += 1
        digest = sha256("\0".join([*key, str(occurrence)]).encode("utf-8"))
        found.append(digest.hexdigest()[:32])
    return found


def _in_cell(cell: int | None) -> str:
    return "" if cell is None else f"cell {cell}: "


def artifact_location(path: str, cwd: Path, base: Path) -> dict[str, str]:
    """Where `path` (absolute, or relative to `cwd`) is, for SARIF: relative to `base` under
    `%SRCROOT%` when inside it, else an absolute `file:` URI; its bytes percent-encoded, `/` kept."""
    # lexically normalised, so that `../x.py` named from a subfolder cannot climb out of `base`
    absolute = PurePath(os.path.normpath(PurePath(cwd, path)))
    inside = relative_path(str(absolute), base)
    if not PurePath(inside).is_absolute():
        return {"uri": quote(os.fsencode(inside), safe="/"), "uriBaseId": SRCROOT}
    return {"uri": "file://" + quote(os.fsencode(absolute.as_posix()), safe="/")}


def _folder_uri(folder: Path) -> str:
    """`folder` as an absolute `file:` URI ending in `/`, as SARIF wants a base URI."""
    return "file://" + quote(os.fsencode(folder.as_posix().rstrip("/") + "/"), safe="/")


def _fix_object(diagnostic: Diagnostic, cwd: Path, base: Path) -> dict[str, Any]:
    """The finding's fix as a SARIF `fix`: whole-line replacements (an empty deleted region
    where lines are inserted)."""
    assert diagnostic.fix is not None
    return {
        "description": {"text": f"{diagnostic.fix.title} ({diagnostic.fix.safety.value})"},
        "artifactChanges": [
            {
                "artifactLocation": artifact_location(diagnostic.path, cwd, base),
                "replacements": [
                    {
                        "deletedRegion": {
                            "startLine": edit.line,
                            "startColumn": edit.column,
                            "endLine": edit.end_line,
                            "endColumn": edit.end_column,
                        },
                        **({"insertedContent": {"text": edit.content}} if edit.content else {}),
                    }
                    for edit in diagnostic.fix.edits
                ],
            }
        ],
    }


def _location(artifact: dict[str, str], region: dict[str, int] | None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if region:
        physical["region"] = region
    return {"physicalLocation": physical}


def sarif_document(
    report: RunReport,
    *,
    root: Path,
    catalogue: Mapping[str, RuleSpec],
    sources: Mapping[str, str] | None = None,
    docs_url: str | None = None,
) -> dict[str, Any]:
    diagnostics = report.diagnostics
    fired = {d.code for d in diagnostics}
    rules = [
        rule_descriptor(spec, fired=code in fired, docs_url=docs_url) for code, spec in sorted(catalogue.items())
    ]
    rule_index = {rule["id"]: index for index, rule in enumerate(rules)}
    for diagnostic in diagnostics:
        if diagnostic.code not in rule_index:
            rule_index[diagnostic.code] = len(rules)
            rules.append(_unknown_rule_descriptor(diagnostic))

    cache = SourceCache(root, sources)
    base = repository_root(root)
    results = []
    # a rewrite that fixes several findings together is one fix: written once, on the first
    # result it fixes; the others name that result (`properties.fixInResult`)
    fix_carrier: dict[Any, int] = {}
    for diagnostic, fingerprint in zip(
        diagnostics, fingerprints(diagnostics, root, cache), strict=True
    ):
        where = diagnostic.location
        region = {
            "startLine": where.line,
            "startColumn": where.column,
            "endLine": where.end_line,
            "endColumn": where.end_column,
        }
        results.append(
            {
                "ruleId": diagnostic.code,
                "ruleIndex": rule_index[diagnostic.code],
                "level": _LEVEL[diagnostic.confidence],
                "rank": _RANK[diagnostic.confidence],
                # a notebook's rows are its cell's: the message names the cell (ruff's notation)
                "message": {"text": _in_cell(diagnostic.cell) + diagnostic.message},
                "locations": [_location(artifact_location(diagnostic.path, root, base), region)],
                "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
                **(
                    {"fixes": [_fix_object(diagnostic, root, base)]}
                    if diagnostic.fix and (diagnostic.path, diagnostic.fix.edits) not in fix_carrier
                    else {}
                ),
                "properties": {
                    **(
                        {"fixInResult": fix_carrier[(diagnostic.path, diagnostic.fix.edits)]}
                        if diagnostic.fix and (diagnostic.path, diagnostic.fix.edits) in fix_carrier
                        else {}
                    ),
                    "fixable": diagnostic.fix_safety is not FixSafety.NONE,
                    "fixSafety": diagnostic.fix_safety.value,
                    **({"note": diagnostic.note} if diagnostic.note else {}),
                    "confidence": diagnostic.confidence.value,
                    **({"cell": diagnostic.cell} if diagnostic.cell is not None else {}),
                },
            }
        )
        if diagnostic.fix:
            fix_carrier.setdefault((diagnostic.path, diagnostic.fix.edits), len(results) - 1)

    errors = report.all_errors
    notifications = []
    for error in errors:
        error_region: dict[str, int] | None = {"startLine": error.line} if error.line else None
        if error_region is not None and error.column:
            error_region["startColumn"] = error.column
        notifications.append(
            {
                "level": "error",
                "message": {"text": _in_cell(error.cell) + error.message},
                "descriptor": {"id": error.kind.value},
                "locations": [_location(artifact_location(error.path, root, base), error_region)],
            }
        )

    base_url = docs_base(docs_url)
    information = base_url + "/index.md" if base_url is not None else None
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "version": offlint.__version__,
                        "semanticVersion": offlint.__version__,
                        **({"informationUri": information} if information else {}),
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": _folder_uri(base)}},
                # our columns count characters, not UTF-16 code units
                "columnKind": "unicodeCodePoints",
                "invocations": [
                    {
                        "executionSuccessful": not errors,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "results": results,
            }
        ],
    }


def render_sarif(
    report: RunReport,
    *,
    root: Path,
    catalogue: Mapping[str, RuleSpec],
    sources: Mapping[str, str] | None = None,
    docs_url: str | None = None,
) -> str:
    return dumps(sarif_document(report, root=root, catalogue=catalogue, sources=sources, docs_url=docs_url))
