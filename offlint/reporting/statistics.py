"""`--statistics`: how often each code fired, like `ruff --statistics`.

Text: one `count<TAB>code<TAB>[*] name` row per code (`[ ]` when the rule has no fix), columns
padded, most frequent first then by code. JSON (when the output format is json):
`{"schema": "offlint-json/1", "statistics": [{"code", "name", "count", "fixable"}, ...]}`.
"""

from __future__ import annotations

from dataclasses import dataclass

from offlint.diagnostics import RunReport
from offlint.reporting.json_format import SCHEMA, dumps


@dataclass(frozen=True)
class CodeStatistics:
    code: str
    name: str
    count: int
    fixable: bool


def code_statistics(report: RunReport) -> list[CodeStatistics]:
    by_code: dict[str, CodeStatistics] = {}
    for diagnostic in report.diagnostics:
        seen = by_code.get(diagnostic.code)
        by_code[diagnostic.code] = CodeStatistics(
            code=diagnostic.code,
            name=diagnostic.name,
            count=(seen.count if seen else 0) + 1,
            fixable=(seen.fixable if seen else False) or diagnostic.fixable,
        )
    return sorted(by_code.values(), key=lambda s: (-s.count, s.code))


def render_statistics_text(report: RunReport) -> str:
    rows = code_statistics(report)
    if not rows:
        return ""
    count_width = max(len(str(row.count)) for row in rows)
    code_width = max(len(row.code) for row in rows)
    return "".join(
        f"{row.count:>{count_width}}\t{row.code:<{code_width}}\t"
        f"{'[*]' if row.fixable else '[ ]'} {row.name}\n"
        for row in rows
    )


def render_statistics_json(report: RunReport) -> str:
    rows = [
        {"code": row.code, "name": row.name, "count": row.count, "fixable": row.fixable}
        for row in code_statistics(report)
    ]
    return dumps({"schema": SCHEMA, "statistics": rows})
