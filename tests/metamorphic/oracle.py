"""The relation: run `offlint check` in-process on a variant and compare with its markers.

A marker `# expect: OFL101` names the line a finding must stay on. A transform that moves the
marked statement's effect elsewhere (the wait extracted into a helper) tags the marker
(`# expect: OFL101 @m1`) and marks the other acceptable line `# alt: @m1`: the finding may be
reported at either (the call site or the helper's statement).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import EXPECT_MARKER, load_catalogue
from offlint.config import SelectionOverrides
from offlint.diagnostics import DEFAULT_MIN_CONFIDENCE, Confidence
from offlint.pipeline.check import CheckOptions, below_floor_hidden, check_paths

TAG = re.compile(r"@m\d+")
ALT = re.compile(r"#\s*alt:\s*(@m\d+)")
PACKAGE = "pkg"


@dataclass(frozen=True)
class Expectation:
    code: str
    file: str
    line: int
    # other (file, line) where the finding counts as kept
    alternatives: tuple[tuple[str, int], ...] = ()


@dataclass
class Verdict:
    preserved: bool
    lost: list[Expectation] = field(default_factory=list)
    found: list[tuple[str, int, str]] = field(default_factory=list)
    extra: list[tuple[str, int, str]] = field(default_factory=list)  # unmarked findings
    errors: list[str] = field(default_factory=list)


def markers(files: dict[str, str]) -> list[Expectation]:
    """The `# expect:` markers of every file, with the `# alt:` lines tagged like them."""
    alts: dict[str, list[tuple[str, int]]] = {}
    raw: list[tuple[str, str, int, str | None]] = []
    for name, text in files.items():
        for number, line in enumerate(text.splitlines(), start=1):
            for tag in ALT.findall(line):
                alts.setdefault(tag, []).append((name, number))
            match = EXPECT_MARKER.search(line)
            if match:
                tag = TAG.search(line[match.start() :])
                for code in re.findall(r"OFL\d{3}", match.group(1)):
                    raw.append((code, name, number, tag.group(0) if tag else None))
    return [Expectation(code, name, line, tuple(alts.get(tag, ())) if tag else ()) for code, name, line, tag in raw]


def run_check(files: dict[str, str], floor: Confidence = DEFAULT_MIN_CONFIDENCE) -> tuple[list[tuple[str, int, str]], list[str]]:
    """Every rule selected (the examples' tests do the same), the default confidence floor
    (findings under it hidden, as `offlint check` does), no cache. One file: the engine on its bytes; a folder: the check pipeline over it, so calls
    across its modules are followed."""
    select = frozenset(load_catalogue())
    if len(files) == 1:
        ((name, text),) = files.items()
        settings = FileSettings(select=select, min_confidence=floor)
        # the engine reports every tier; the pipeline hides those under the floor, as here
        report = below_floor_hidden(check_source(text.encode(), name, settings), settings)
        found = [(name, d.location.line, d.code) for d in report.diagnostics]
        return sorted(found), [str(e) for e in report.errors]
    with tempfile.TemporaryDirectory(prefix="offlint-metamorphic-") as tmp:
        root = Path(tmp).resolve()
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        run = check_paths(
            CheckOptions(
                paths=(root,), overrides=SelectionOverrides(select=("ALL",), min_confidence=floor.value), cwd=root, use_cache=False, jobs=1
            )
        )
        found = []
        errors = [str(e) for e in run.errors]
        for file in run.files:
            errors.extend(str(e) for e in file.errors)
            for d in file.diagnostics:
                path = Path(d.path)
                rel = (path if path.is_absolute() else root / path).resolve().relative_to(root).as_posix()
                found.append((rel, d.location.line, d.code))
        return sorted(found), errors


def judge(kind: str, files: dict[str, str], floor: Confidence = DEFAULT_MIN_CONFIDENCE) -> Verdict:
    found, errors = run_check(files, floor)
    expected = markers(files)
    if kind == "good":
        return Verdict(preserved=not found and not errors, found=found, extra=found, errors=errors)
    lost = []
    matched: set[tuple[str, int, str]] = set()
    for exp in expected:
        places = [(exp.file, exp.line), *exp.alternatives]
        hits = [(f, n, exp.code) for f, n in places if (f, n, exp.code) in found]
        matched.update(hits)
        if not hits:
            lost.append(exp)
    extra = [f for f in found if f not in matched]
    return Verdict(preserved=not lost and not errors, lost=lost, found=found, extra=extra, errors=errors)
