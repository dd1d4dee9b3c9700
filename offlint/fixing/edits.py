"""What fixers produce: a `StatementPlan` of statement-level changes, each tagged with the rule it
fixes, applied in one libcst pass; and the `Edit`s reported for them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import cast

import libcst as cst
from libcst.metadata import CodeRange

from offlint.diagnostics import FixSafety


@dataclass(frozen=True)
class Edit:
    rule: str  # the rule code the edit fixes (the first, when it fixes several)
    title: str  # what the edit does, for humans
    safety: FixSafety
    line: int  # 1-based, in the text the fixing pass read (the original text for the first pass)
    end_line: int
    fixer: str  # "offloader-overlap", "offloader-inline", "OFL204", ...
    also_fixes: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "also_fixes": list(self.also_fixes),
            "title": self.title,
            "safety": self.safety.value,
            "line": self.line,
            "end_line": self.end_line,
            "fixer": self.fixer,
        }


_KEEP = object()


@dataclass
class _Ops:
    before: list[cst.BaseStatement] = field(default_factory=list)
    after: list[cst.BaseStatement] = field(default_factory=list)
    replacement: object = _KEEP  # a node, None (remove), or _KEEP


@dataclass(frozen=True)
class Owner:
    """A finding a planned change belongs to: its rule and the node the rule reported."""

    code: str
    node: cst.CSTNode

    def __hash__(self) -> int:
        return hash((self.code, id(self.node)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Owner) and other.code == self.code and other.node is self.node


@dataclass(frozen=True)
class _Record:
    anchor: cst.CSTNode
    rules: tuple[str, ...]
    title: str
    # the findings this change fixes (the fixer's `owning(...)` block it was planned in)
    owners: frozenset[Owner] = frozenset()
    label: str = ""  # the strategy it belongs to ("offloader-overlap"), "" for the fixer's own
    is_import: bool = False  # an `import` AddImportsVisitor adds: shared, never joins units


@dataclass
class FixUnit:
    """The changes of one plan that fix the same findings together: what one finding's fix is.

    Changes that share a statement, or a finding, are one unit (a hazard pair fixed by one
    rewrite is one unit, so it is applied whole or not at all)."""

    owners: frozenset[Owner]
    plan: StatementPlan
    label: str
    titles: tuple[str, ...]
    notes: tuple[str, ...] = ()


class StatementPlan:
    """Changes keyed by the identity of statements in the module the fixer analysed.

    Only statements are touched, so everything between them (comments, blank lines, quoting,
    formatting) is kept byte for byte by libcst's round trip.
    """

    def __init__(self) -> None:
        self._ops: dict[cst.CSTNode, _Ops] = {}
        self.records: list[_Record] = []
        self.notes: list[str] = []
        # the findings each note is about (the `owning` block it was written in): a fix's notes
        self._note_owners: list[frozenset[Owner]] = []
        # findings the fixer looked at and leaves: (rule code, the finding's node, why)
        self.not_fixed: list[tuple[str, cst.CSTNode, str]] = []
        self._imports: list[str] = []  # modules `import`ed when the plan applies
        self._import_owners: dict[str, frozenset[Owner]] = {}
        self._owners: frozenset[Owner] = frozenset()
        self._label = ""
        # findings fixed together or not at all (a fork and the wait on its event; two waits one
        # rewrite guards): in one plan they are one unit; across fixers `check` joins their fixes
        self.pairs: list[tuple[Owner, Owner]] = []

    def __bool__(self) -> bool:
        return bool(self._ops) or bool(self._imports)

    @contextmanager
    def owning(self, owners: Iterator[Owner] | list[Owner] | tuple[Owner, ...], label: str = "") -> Iterator[None]:
        """Changes planned inside belong to these findings: they are those findings' fix."""
        saved = self._owners, self._label
        self._owners, self._label = frozenset(owners), label or self._label
        try:
            yield
        finally:
            self._owners, self._label = saved

    @contextmanager
    def labelled(self, label: str) -> Iterator[None]:
        """Changes planned inside belong to the strategy `label` (the report's fixer name)."""
        saved = self._label
        self._label = label
        try:
            yield
        finally:
            self._label = saved

    def absorb(self, other: StatementPlan) -> bool:
        """Add `other`'s changes (planned on the same tree); False when both replace one statement."""
        for anchor, op in other._ops.items():
            mine = self._ops.get(anchor)
            if mine is None:
                self._ops[anchor] = _Ops(list(op.before), list(op.after), op.replacement)
                continue
            if mine.replacement is not _KEEP and op.replacement is not _KEEP:
                return False
            mine.before.extend(op.before)
            mine.after.extend(op.after)
            if op.replacement is not _KEEP:
                mine.replacement = op.replacement
        self.records.extend(other.records)
        for module in other._imports:
            if module not in self._imports:
                self._imports.append(module)
        return True

    def note(self, text: str) -> None:
        """A note for the user about the fix of the findings owned here (or the file's)."""
        self.notes.append(text)
        self._note_owners.append(self._owners)

    def join_units(self, first: Owner, second: Owner) -> None:
        """`first` and `second` are fixed together or not at all."""
        self.pairs.append((first, second))

    def _record(self, anchor: cst.CSTNode, rules: tuple[str, ...], title: str, *, is_import: bool = False) -> None:
        self.records.append(_Record(anchor, rules, title, self._owners, self._label, is_import))

    def units(self) -> list[FixUnit]:
        """The plan split into its fixes: records sharing a statement or a finding join one unit.
        Records planned outside any `owning` block belong to no finding and are in no unit."""
        parent: dict[int, int] = {}

        def find(x: int) -> int:
            while parent.setdefault(x, x) != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: int, b: int) -> None:
            parent[find(a)] = find(b)

        owned = [r for r in self.records if r.owners]
        by_anchor: dict[int, int] = {}
        by_owner: dict[Owner, int] = {}
        for index, record in enumerate(owned):
            find(index)
            if not record.is_import:
                union(index, by_anchor.setdefault(id(record.anchor), index))
            for owner in record.owners:
                union(index, by_owner.setdefault(owner, index))
        for first, second in self.pairs:
            if first in by_owner and second in by_owner:
                union(by_owner[first], by_owner[second])
        groups: dict[int, list[_Record]] = {}
        for index, record in enumerate(owned):
            groups.setdefault(find(index), []).append(record)
        units = []
        for records in groups.values():
            owners = frozenset(o for r in records for o in r.owners)
            sub = StatementPlan()
            anchors = {id(r.anchor) for r in records}
            sub._ops = {a: op for a, op in self._ops.items() if id(a) in anchors}
            sub.records = list(records)
            sub._imports = [m for m in self._imports if self._import_owners.get(m, frozenset()) & owners]
            label = next((r.label for r in records if r.label), "")
            titles = tuple(dict.fromkeys(r.title for r in records))
            notes = tuple(n for n, o in zip(self.notes, self._note_owners, strict=False) if o & owners)
            units.append(FixUnit(owners, sub, label, titles, notes))
        return units

    def need_import(
        self, module: str, anchor: cst.BaseStatement | None, rules: tuple[str, ...], title: str
    ) -> None:
        """`import <module>`, added (once, where imports go) by libcst's AddImportsVisitor; the
        anchor is the statement it lands next to, for the report."""
        if module in self._imports:
            self._import_owners[module] = self._import_owners[module] | self._owners
            return
        self._imports.append(module)
        self._import_owners[module] = self._owners
        if anchor is not None:
            self._record(anchor, rules, title, is_import=True)

    def _at(self, anchor: cst.CSTNode) -> _Ops:
        return self._ops.setdefault(anchor, _Ops())

    def insert_before(
        self,
        anchor: cst.BaseStatement,
        new: list[cst.BaseStatement],
        rules: tuple[str, ...],
        title: str,
    ) -> None:
        self._at(anchor).before.extend(new)
        self._record(anchor, rules, title)

    def insert_after(
        self,
        anchor: cst.BaseStatement,
        new: list[cst.BaseStatement],
        rules: tuple[str, ...],
        title: str,
    ) -> None:
        self._at(anchor).after.extend(new)
        self._record(anchor, rules, title)

    def replace(
        self, node: cst.CSTNode, new: cst.CSTNode | None, rules: tuple[str, ...], title: str
    ) -> None:
        ops = self._at(node)
        if ops.replacement is not _KEEP:
            raise ValueError("two fixes replace the same statement")
        ops.replacement = new
        self._record(node, rules, title)

    def apply(self, module: cst.Module) -> cst.Module:
        ops = self._ops
        if module.default_newline != "\n":
            # written with `\n`: libcst renders line ends in the module's style, but not the line
            # breaks inside a string literal (a generated docstring), which are its bytes
            ops = {anchor: _in_newline_style(op, module.default_newline) for anchor, op in ops.items()}
        result = module.visit(_PlanApplier(ops))
        assert isinstance(result, cst.Module)
        if self._imports:
            from libcst.codemod import CodemodContext
            from libcst.codemod.visitors import AddImportsVisitor

            context = CodemodContext()
            for name in self._imports:
                AddImportsVisitor.add_needed_import(context, name)
            result = AddImportsVisitor(context).transform_module(result)
        return result

    def edits(
        self, positions: dict[cst.CSTNode, CodeRange], safety: FixSafety, fixer: str
    ) -> list[Edit]:
        out = []
        for record in self.records:
            where = positions.get(record.anchor)
            line = where.start.line if where else 0
            end = where.end.line if where else 0
            out.append(
                Edit(
                    rule=record.rules[0],
                    also_fixes=record.rules[1:],
                    title=record.title,
                    safety=safety,
                    line=line,
                    end_line=end,
                    fixer=fixer,
                )
            )
        return out


_LONE_LF = re.compile(r"(?<!\r)\n")


class _StringNewlines(cst.CSTTransformer):
    def __init__(self, newline: str) -> None:
        super().__init__()
        self.newline = newline

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.SimpleString:
        return updated_node.with_changes(value=_LONE_LF.sub(self.newline, updated_node.value))

    def leave_FormattedStringText(
        self, original_node: cst.FormattedStringText, updated_node: cst.FormattedStringText
    ) -> cst.FormattedStringText:
        return updated_node.with_changes(value=_LONE_LF.sub(self.newline, updated_node.value))


def _in_newline_style(op: _Ops, newline: str) -> _Ops:
    """`op` with the line breaks inside its new string literals in the module's style."""
    convert = _StringNewlines(newline)

    def each(nodes: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        return [cast(cst.BaseStatement, node.visit(convert)) for node in nodes]

    replacement = op.replacement
    if isinstance(replacement, cst.CSTNode):
        replacement = replacement.visit(convert)
    return _Ops(before=each(op.before), after=each(op.after), replacement=replacement)


class _PlanApplier(cst.CSTTransformer):
    def __init__(self, ops: dict[cst.CSTNode, _Ops]) -> None:
        super().__init__()
        self.ops = ops
        # no statement is inside an expression: when every change is at a statement, the walk
        # skips expressions, which on a file with a large literal were most of the pass's time
        self.skip_expressions = all(isinstance(a, cst.BaseStatement | cst.BaseSmallStatement) for a in ops)

    def on_visit(self, node: cst.CSTNode) -> bool:
        return not (self.skip_expressions and isinstance(node, cst.BaseExpression))

    def on_leave(  # type: ignore[override]  # libcst types it per node type; this is any node
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        ops = self.ops.get(original_node)
        if ops is None:
            return updated_node
        middle: list[cst.CSTNode] = []
        if ops.replacement is _KEEP:
            middle = [updated_node]
        elif ops.replacement is not None:
            assert isinstance(ops.replacement, cst.CSTNode)
            middle = [ops.replacement]
        before = list(ops.before)
        if before:
            # comments and blank lines above the anchor stay above whatever now comes first
            # (when the anchor stays, only up to its last blank line: comments right above it
            # describe it and stay with it)
            anchor_lines = list(getattr(original_node, "leading_lines", ()))
            split = len(anchor_lines)
            if middle:
                blanks = [i for i, line in enumerate(anchor_lines) if line.comment is None]
                split = blanks[-1] + 1 if blanks else 0
            moved, kept = anchor_lines[:split], anchor_lines[split:]
            if moved:
                before[0] = before[0].with_changes(
                    leading_lines=[*moved, *leading_lines_of(before[0])]
                )
                middle = [
                    m.with_changes(leading_lines=kept) if hasattr(m, "leading_lines") else m
                    for m in middle
                ]
        nodes: list[cst.CSTNode] = [*before, *middle, *ops.after]
        if not nodes:
            return cst.RemovalSentinel.REMOVE
        if len(nodes) == 1:
            return nodes[0]
        return cst.FlattenSentinel(nodes)


def leading_lines_of(stmt: cst.BaseStatement) -> list[cst.EmptyLine]:
    if isinstance(stmt, cst.SimpleStatementLine | cst.BaseCompoundStatement):
        return list(stmt.leading_lines)
    return []


def statements(text: str) -> list[cst.BaseStatement]:
    """Statements parsed from code written with 4-space indents and `\\n`: libcst then renders
    them with the target module's own indentation and newline (blocks and newlines parsed with
    the default style carry no explicit whitespace of their own)."""
    # a leading `pass` keeps the snippet's first comments on its first statement (libcst would
    # otherwise move them into the module header)
    return list(cst.parse_module("pass\n" + text).body[1:])
