"""offlint's diagnostic model in the protocol's terms: ranges, severities, the reachability chain
as related information, fixes as text edits.

offlint counts rows and columns from 1, columns in characters (code points), ends exclusive; the
protocol counts from 0, columns in the code units the client chose (UTF-16 unless it asked for
another), so every position goes through the document's position codec.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from offlint.diagnostics import Confidence, Diagnostic, FixSafety, TextEdit

SOURCE = "offlint"
# the rule pages; the same address SARIF's `helpUri` gives
RULE_DOCS_URL = "https://github.com/offlint/offlint/blob/main/docs/rules/{code}.md"
# how sure the finding is decides how loud it is, as in SARIF (error / warning / note)
SEVERITY = {
    Confidence.HIGH: types.DiagnosticSeverity.Error,
    Confidence.MEDIUM: types.DiagnosticSeverity.Warning,
    Confidence.LOW: types.DiagnosticSeverity.Information,
}
_NOTE_PREFIX = "capture-reachable: "
# "called from A ← B ← pkg.mod.C (reason)" / "defined inside f (reason)"
_CHAIN = re.compile(r"^(?P<verb>called from|defined inside) (?P<links>.+?)(?: \((?P<reason>.*)\))?$")


def to_range(codec: PositionCodec, lines: Sequence[str], line: int, column: int, end_line: int, end_column: int) -> types.Range:
    """A 1-based, end-exclusive span in characters, as the client counts."""
    start = types.Position(line=max(line - 1, 0), character=max(column - 1, 0))
    end = types.Position(line=max(end_line - 1, 0), character=max(end_column - 1, 0))
    return codec.range_to_client_units(list(lines), types.Range(start=start, end=end))


def diagnostic_range(codec: PositionCodec, lines: Sequence[str], diagnostic: Diagnostic) -> types.Range:
    where = diagnostic.location
    return to_range(codec, lines, where.line, where.column, where.end_line, where.end_column)


def to_lsp_diagnostic(
    codec: PositionCodec,
    lines: Sequence[str],
    diagnostic: Diagnostic,
    uri: str,
    *,
    fix_known: bool,
    related: list[types.DiagnosticRelatedInformation] | None = None,
    related_supported: bool = True,
) -> types.Diagnostic:
    """One finding: its code with a link to the rule's page, its message with the confidence
    (`[medium]`, as `--output-format concise` writes it), the reachability chain as related
    information. `data` keeps what code actions need to find it again."""
    suffix = "" if diagnostic.confidence is Confidence.HIGH else f" [{diagnostic.confidence.value}]"
    message = diagnostic.message + suffix
    if diagnostic.note and not related_supported:
        message += f"\n{diagnostic.note}"
    fixable = diagnostic.fix is not None if fix_known else diagnostic.fixable
    return types.Diagnostic(
        range=diagnostic_range(codec, lines, diagnostic),
        message=message,
        severity=SEVERITY[diagnostic.confidence],
        code=diagnostic.code,
        code_description=types.CodeDescription(href=RULE_DOCS_URL.format(code=diagnostic.code)),
        source=SOURCE,
        related_information=related or None,
        data={
            "confidence": diagnostic.confidence.value,
            "name": diagnostic.name,
            "note": diagnostic.note,
            # the rule's offer until the project run confirmed it, then what `fix` really does
            "fix": (diagnostic.fix.safety.value if diagnostic.fix else FixSafety.NONE.value)
            if fix_known
            else diagnostic.fix_safety.value,
            "fixable": fixable,
            "line": diagnostic.location.line,
            "column": diagnostic.location.column,
        },
    )


def chain_links(note: str | None) -> list[tuple[str, str]]:
    """The reachability note as (what is said, the qualified name it names), nearest first:
    `called from A ← B (reason)` gives [("called from A", "A"), ("← B (reason)", "B")]."""
    if not note:
        return []
    text = note.removeprefix(_NOTE_PREFIX)
    match = _CHAIN.match(text)
    if match is None:
        return [(text, "")]
    names = [name.strip() for name in match.group("links").split("←")]
    reason = match.group("reason")
    out: list[tuple[str, str]] = []
    for index, name in enumerate(names):
        said = f"{match.group('verb')} {name}" if index == 0 else f"← {name}"
        if index == len(names) - 1 and reason:
            said += f" ({reason})"
        out.append((said, name if name != "…" else ""))
    return out


_DEFINITION = re.compile(r"^(?P<indent>[ \t]*)(?:async[ \t]+)?(?:def|class)[ \t]+(?P<name>\w+)")


@functools.lru_cache(maxsize=8)
def _definitions(source: str) -> tuple[tuple[int, int, str], ...]:
    """(line, indentation, name) of every `def` and `class` line, once per text: a scan of the
    lines, not a parse (a parse of a large file cost a tenth of the edit's whole latency)."""
    found = []
    for number, line in enumerate(source.splitlines(), start=1):
        if "def" in line or "class" in line:
            match = _DEFINITION.match(line)
            if match is not None:
                found.append((number, len(match.group("indent").expandtabs()), match.group("name")))
    return tuple(found)


def definition_line(source: str, qualname: str) -> int | None:
    """The 1-based line of `def`/`class` `qualname` (`Class.method`, `outer.<locals>.inner`):
    each part the outermost definition of that name inside the previous one's block (which ends
    at the next definition indented no deeper than it); the first of those when there are more."""
    definitions = _definitions(source)
    parts = [part for part in qualname.split(".") if part and part != "<locals>"]
    if not parts:
        return None
    start, depth = 0, -1
    found: tuple[int, int, int] | None = None
    for part in parts:
        found = None
        for index in range(start, len(definitions)):
            line, indent, name = definitions[index]
            if indent <= depth:
                break  # the enclosing block is over
            if name == part and (found is None or indent < found[2]):
                found = (index, line, indent)
        if found is None:
            return None
        start, depth = found[0] + 1, found[2]
    return found[1] if found is not None else None


def module_file(root: Path, dotted: str) -> tuple[Path, str] | None:
    """The file of the longest module prefix of `dotted` below `root`, and the rest of the name."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        base = root.joinpath(*parts[:cut])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate, ".".join(parts[cut:])
    return None


def related_information(
    codec: PositionCodec,
    lines: Sequence[str],
    source: str,
    uri: str,
    diagnostic: Diagnostic,
    root: Path | None,
    uri_of_path: Callable[[str], str | None],
) -> list[types.DiagnosticRelatedInformation]:
    """The reachability chain: one entry per call on the way from where capture starts, at the
    definition it names (in this buffer, or in the module of the workspace it names), else at
    the finding itself."""
    own = diagnostic_range(codec, lines, diagnostic)
    out: list[types.DiagnosticRelatedInformation] = []
    for said, name in chain_links(diagnostic.note):
        location = types.Location(uri=uri, range=own)
        line = definition_line(source, name) if name else None
        if line is not None:
            location = types.Location(uri=uri, range=_line_range(codec, lines, line))
        elif name and root is not None:
            found = module_file(root, name)
            if found is not None:
                path, local = found
                try:
                    other = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    other = ""
                other_line = definition_line(other, local) if local else 1
                if other_line is not None:
                    other_lines = other.splitlines(keepends=True)
                    location = types.Location(
                        uri=uri_of_path(os.fspath(path)) or uri, range=_line_range(codec, other_lines, other_line)
                    )
        out.append(types.DiagnosticRelatedInformation(location=location, message=said))
    return out


def _line_range(codec: PositionCodec, lines: Sequence[str], line: int) -> types.Range:
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    body = text.rstrip("\r\n")
    indent = len(body) - len(body.lstrip())
    return to_range(codec, lines, line, indent + 1, line, len(body) + 1)


def text_edits(codec: PositionCodec, lines: Sequence[str], edits: Sequence[TextEdit]) -> list[types.TextEdit]:
    """A fix's edits (1-based, characters) as the protocol's."""
    return [
        types.TextEdit(
            range=to_range(codec, lines, e.line, e.column, e.end_line, e.end_column), new_text=e.content
        )
        for e in edits
    ]


def edits_between(codec: PositionCodec, old: str, new: str) -> list[types.TextEdit]:
    """The line-level edits that turn `old` into `new` (what a whole-text result becomes: a
    small edit keeps the editor's cursor, marks and undo history where they were)."""
    before = old.splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    out: list[types.TextEdit] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start = types.Position(line=i1, character=0)
        end = types.Position(line=i2, character=0)
        if before and i2 == len(before) and not before[-1].endswith(("\n", "\r")):
            # the last line has no line break: the edit ends at its end
            end = types.Position(line=i2 - 1, character=len(before[-1]))
        span = codec.range_to_client_units(before, types.Range(start=start, end=end))
        out.append(types.TextEdit(range=span, new_text="".join(after[j1:j2])))
    return out
