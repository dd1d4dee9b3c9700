"""The one diagnostic model. Every renderer (full, concise, json, sarif, github) is a view of it."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field


class FixSafety(str, enum.Enum):
    """How much a rule's fix can change behaviour (ruff's applicability, in our words)."""

    SAFE = "safe"  # keeps the meaning of correct code; applied by `offlint fix --apply`
    UNSAFE = "unsafe"  # changes behaviour on purpose (it is the fix); applied too, listed as such
    NONE = "none"  # no automatic fix exists


class Confidence(str, enum.Enum):
    """How capture reaches a finding (shared/CATALOGUE.md): what a team triages first.

    high: reached by calls from a capture region in the checked tree, or code that branches on
    the capture state, or named by configuration; hazards that hold however the code is reached
    (a no-op `record_stream`, an eager race) are high too. medium: the forward path of
    offloader-style code whose capture lives outside the tree (an engine's graph runner calling
    `model(...)`). low: any other method of a class that holds streams or events.
    """

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        return _CONFIDENCE_RANK[self]

    def at_least(self, floor: Confidence) -> bool:
        return self.rank >= floor.rank


_CONFIDENCE_RANK = {Confidence.LOW: 1, Confidence.MEDIUM: 2, Confidence.HIGH: 3}
DEFAULT_MIN_CONFIDENCE = Confidence.MEDIUM


class ErrorKind(str, enum.Enum):
    """Why a file could not be analysed. These are errors of the run, never rule codes."""

    MISSING = "missing-path"
    UNREADABLE = "unreadable"
    UNDECODABLE = "undecodable"
    SYNTAX = "syntax-error"
    TOO_DEEP = "too-deeply-nested"
    TOO_LARGE = "too-large"
    INTERNAL = "internal-error"
    CHANGED = "changed-on-disk"
    WRITE = "write-failed"


@dataclass(frozen=True, order=True)
class Location:
    """1-based line, 1-based column (in characters), like ruff and SARIF."""

    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class TextEdit:
    """Replace the text from (line, column) up to (end_line, end_column) with `content`; 1-based,
    end exclusive; an insertion when both ends are the same point (ruff's and SARIF's edits)."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True)
class Fix:
    """The fix a finding carries: what `offlint fix` changes for it, on the text `check` read.

    A rewrite that fixes several findings together (an event's producer and its consumer, a fork
    and the wait on its event) is one fix, carried by each of them. The edits change only the
    statements of the findings that carry it. `fix` applies exactly these (the non-overlapping
    ones each round), re-checks, and applies what the re-check attaches, until nothing is left.
    """

    title: str
    safety: FixSafety
    edits: tuple[TextEdit, ...]
    # the fixer (and strategy) that planned it: "OFL204", "offloader-overlap", "fork-join"...
    fixer: str = ""
    # what the user must know about it ("call join_offloader_copies at the end of every forward")
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Diagnostic:
    path: str
    location: Location
    code: str
    name: str
    message: str
    fix_title: str | None = None
    fix_safety: FixSafety = FixSafety.NONE
    # the source line(s) the diagnostic points at, kept for code frames and fingerprints
    source_line: str = ""
    # why the code counts as capture-reachable, for rules that only fire there ("capture-reachable:
    # method of offloader-style class Offloader"): what a user checks first when triaging
    note: str | None = None
    confidence: Confidence = Confidence.HIGH
    # what `fix` changes for this finding: set by the pipeline where a fixer plans it (then and
    # only then the diagnostic stays fixable, [*]); None before that, and where none is planned
    fix: Fix | None = None
    # the notebook cell (1-based) the location is in, whose own rows it counts; None in a .py
    cell: int | None = None
    # why its rule's fix is not offered here (set where a fixer looked and left it): what
    # `fix` prints as "not fixed: <reason>"
    not_fixed: str | None = None

    @property
    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.location.line, self.location.column, self.code)

    @property
    def position(self) -> str:
        """`line:col`, or `cell N:line:col` in a notebook (ruff's notation)."""
        where = f"{self.location.line}:{self.location.column}"
        return where if self.cell is None else f"cell {self.cell}:{where}"

    @property
    def fixable(self) -> bool:
        """Its rule offers a fix here. Once the pipeline has confirmed fixes (`check`), true
        exactly when the diagnostic carries one (`fix`)."""
        return self.fix_safety is not FixSafety.NONE

    def without_fix(self) -> Diagnostic:
        """This diagnostic, offering no fix (its rule has one, but not for this code)."""
        if not self.fixable and self.fix is None:
            return self
        return dataclasses.replace(self, fix_safety=FixSafety.NONE, fix=None)

    def with_fix(self, fix: Fix) -> Diagnostic:
        return dataclasses.replace(self, fix=fix, fix_safety=fix.safety, not_fixed=None)

    def left_because(self, reason: str) -> Diagnostic:
        """This diagnostic, offering no fix, and why."""
        return dataclasses.replace(self.without_fix(), not_fixed=reason)


@dataclass(frozen=True)
class FileError:
    path: str
    kind: ErrorKind
    message: str
    line: int | None = None
    cell: int | None = None  # the notebook cell `line` counts in; None in a .py
    column: int | None = None  # 1-based, where known (a syntax error's)

    def one_line(self) -> str:
        """`path:line:col: kind: message` (`path:line:`, `path:` where less is known)."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        where = f"{self.path}:{cell}{self.line}" if self.line else self.path
        if self.line and self.column:
            where += f":{self.column}"
        return f"{where}: {self.kind.value}: {self.message}"


@dataclass
class FileReport:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    parsed: bool = False  # False when the prefilter proved the file cannot hold a hazard
    suppressed: int = 0
    hidden: int = 0  # findings below the confidence floor (--min-confidence)
    # what other modules need to know of this one (analysis/callgraph.py's ModuleIndex)
    index: tuple[tuple[str, str, str, tuple[tuple[str, bool, tuple[tuple[str, str], ...]], ...]], ...] = ()
    # the floor `check` confirmed fixes at, when findings below it kept their rule's offer
    # unconfirmed (no libcst parse paid for what the run hides); a run at a lower floor
    # analyses the file again. None: every finding's fix is settled.
    fixes_confirmed_at: Confidence | None = None
    cached: bool = False
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class RunReport:
    files: list[FileReport] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)  # errors not tied to one analysed file
    timings: dict[str, float] = field(default_factory=dict)
    unread: int = 0  # cached files the stat index knew unchanged: neither read nor hashed
    # files named on the command line that `exclude` left out (--force-exclude), as displayed
    excluded: list[str] = field(default_factory=list)

    @property
    def hidden(self) -> int:
        return sum(f.hidden for f in self.files)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        found = [d for f in self.files for d in f.diagnostics]
        return sorted(found, key=lambda d: d.sort_key)

    @property
    def all_errors(self) -> list[FileError]:
        found = list(self.errors) + [e for f in self.files for e in f.errors]
        return sorted(found, key=lambda e: (e.path, e.cell or 0, e.line or 0, e.kind.value))

    @property
    def files_parsed(self) -> int:
        return sum(1 for f in self.files if f.parsed)
