"""The rule catalogue: one TOML file per rule under `rules/`, read by the tool and by the tests.

Each file holds what a user reads about a rule (message, fix title, docs in ruff's sections) and
its bad/good examples. The logic lives in `offlint/analysis/rules/<code>_<name>.py`. Nothing here
is written twice: `offlint rule`, SARIF help and the example tests are generated from these files.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from offlint.diagnostics import FixSafety

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CODE_PATTERN = re.compile(r"^OFL[1-9]\d\d$")
NAME_PATTERN = re.compile(r"^[a-z]+(-[a-z0-9]+)*$")
DOC_SECTIONS = ("what", "why", "example", "use_instead", "fix_safety", "references")
DOC_HEADINGS = {
    "what": "What it does",
    "why": "Why is this bad?",
    "example": "Example",
    "use_instead": "Use instead",
    "fix_safety": "Fix safety",
    "references": "References",
}
# a trailing `# expect: OFL101` marks the line a bad example must be flagged on
EXPECT_MARKER = re.compile(r"#\s*expect:\s*((?:OFL\d{3}[ ,]*)+)")


class CatalogueError(Exception):
    """A rule file is malformed: a bug in offlint itself, reported with the file named."""


@dataclass(frozen=True)
class RuleExample:
    rule: str
    kind: str  # "bad" or "good"
    index: int
    title: str
    code: str
    fixed: str | None = None  # for fixable bad examples: what `offlint fix` must produce
    config: dict[str, object] = field(default_factory=dict)  # [tool.offlint] overrides

    @property
    def id(self) -> str:
        return f"{self.rule}-{self.kind}{self.index}"

    def expected(self) -> list[tuple[int, str]]:
        """(line, code) pairs marked with `# expect: CODE` in a bad example."""
        found: list[tuple[int, str]] = []
        for number, line in enumerate(self.code.splitlines(), start=1):
            match = EXPECT_MARKER.search(line)
            if match:
                for code in re.findall(r"OFL\d{3}", match.group(1)):
                    found.append((number, code))
        return found


@dataclass(frozen=True)
class RuleSpec:
    code: str
    name: str
    summary: str
    message: str
    fix_title: str | None
    fix_safety: FixSafety
    default_enabled: bool
    prevents: str  # the CUDA/PyTorch error or consequence the rule prevents
    docs: dict[str, str]
    bad: tuple[RuleExample, ...]
    good: tuple[RuleExample, ...]
    source: Path

    @property
    def family(self) -> str:
        return self.code[:4]

    def render_message(self, **details: str) -> str:
        try:
            return self.message.format(**details)
        except (KeyError, IndexError, ValueError):
            return self.message

    def markdown(self) -> str:
        """The rule's documentation as Markdown, in ruff's section order."""
        out = [f"# {self.name} ({self.code})", "", self.summary, ""]
        fix = {
            FixSafety.SAFE: "Fix is always available and safe.",
            FixSafety.UNSAFE: "Fix is available but unsafe (it changes behaviour on purpose).",
            FixSafety.NONE: "No automatic fix.",
        }[self.fix_safety]
        out += [f"*{fix}*", ""]
        if not self.default_enabled:
            out += ["*Disabled by default: enable it with `--select " + self.code + "`.*", ""]
        for key in DOC_SECTIONS:
            text = self.docs.get(key, "").strip()
            if text:
                out += [f"## {DOC_HEADINGS[key]}", "", text, ""]
        return "\n".join(out).rstrip() + "\n"


def catalogue_dir() -> Path:
    """`rules/` in a checkout, or the copy the wheel carries as `offlint/_catalogue`."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_catalogue", package.parent / "rules"):
        if candidate.is_dir():
            return candidate
    raise CatalogueError(f"rule catalogue not found next to {package}")


def _examples(code: str, kind: str, raw: object, source: Path) -> tuple[RuleExample, ...]:
    if not isinstance(raw, list):
        raise CatalogueError(f"{source}: [[{kind}]] must be an array of tables")
    found = []
    for index, item in enumerate(raw, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("code"), str):
            raise CatalogueError(f"{source}: {kind} example {index} needs a `code` string")
        fixed = item.get("fixed")
        found.append(
            RuleExample(
                rule=code,
                kind=kind,
                index=index,
                title=str(item.get("title", "")),
                code=item["code"],
                fixed=fixed if isinstance(fixed, str) else None,
                config=dict(item.get("config", {})),
            )
        )
    return tuple(found)


def load_rule_file(path: Path) -> RuleSpec:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CatalogueError(f"{path}: {exc}") from exc
    try:
        code = data["code"]
        name = data["name"]
        if not CODE_PATTERN.match(code) or not NAME_PATTERN.match(name):
            raise CatalogueError(f"{path}: bad code or name ({code!r}, {name!r})")
        docs = {key: str(value) for key, value in data.get("docs", {}).items()}
        return RuleSpec(
            code=code,
            name=name,
            summary=data["summary"],
            message=data["message"],
            fix_title=data.get("fix_title") or None,
            fix_safety=FixSafety(data.get("fix_safety", "none")),
            default_enabled=bool(data.get("default_enabled", True)),
            prevents=data.get("prevents", ""),
            docs=docs,
            bad=_examples(code, "bad", data.get("bad", []), path),
            good=_examples(code, "good", data.get("good", []), path),
            source=path,
        )
    except KeyError as exc:
        raise CatalogueError(f"{path}: missing key {exc}") from exc
    except ValueError as exc:
        raise CatalogueError(f"{path}: {exc}") from exc


# the first table header ends a rule file's head (its top-level keys: code, name, message, ...)
_FIRST_TABLE = re.compile(r"^\[", re.MULTILINE)


@cache
def default_selection() -> dict[str, bool]:
    """Every rule code (in order) -> enabled by default. Selection needs no more, so this parses
    only each file's head, not its docs and examples: a cached run reads nothing else from the
    catalogue. A head that does not parse on its own is read whole."""
    found: dict[str, bool] = {}
    for path in sorted(catalogue_dir().glob("OFL*.toml")):
        try:
            text = path.read_text(encoding="utf-8")
            cut = _FIRST_TABLE.search(text)
            head = tomllib.loads(text[: cut.start()] if cut else text)
            code, enabled = head["code"], head.get("default_enabled", True)
            if not isinstance(code, str) or not CODE_PATTERN.match(code) or not isinstance(enabled, bool):
                raise ValueError(code)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, ValueError):
            spec = load_rule_file(path)
            code, enabled = spec.code, spec.default_enabled
        found[code] = enabled
    return dict(sorted(found.items()))


@cache
def load_catalogue() -> dict[str, RuleSpec]:
    """Every rule spec by code, in code order."""
    specs = [load_rule_file(p) for p in sorted(catalogue_dir().glob("OFL*.toml"))]
    return {spec.code: spec for spec in sorted(specs, key=lambda s: s.code)}
