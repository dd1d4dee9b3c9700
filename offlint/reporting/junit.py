"""`--output-format junit`: JUnit XML, which most CI systems (Jenkins, GitLab, Azure, CircleCI)
show as test results. One `<testsuite>` per file with findings or errors, one failing
`<testcase>` per diagnostic (`name` the rule code, `classname` the path, `line`/`column` its
position: in a notebook the cell's, with `cell`) and one `<error>` test case per file that could
not be checked. A clean run is one passing test case, so the report is never empty."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from offlint.diagnostics import RunReport
from offlint.reporting._sources import display_path

# XML 1.0 cannot hold these characters at all, escaped or not
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def render_junit(report: RunReport, *, root: Path) -> str:
    suites = ET.Element("testsuites", name="offlint")
    by_file: dict[str, ET.Element] = {}
    counts: dict[str, list[int]] = {}  # path -> [tests, failures, errors]

    def suite(path: str) -> ET.Element:
        if path not in by_file:
            by_file[path] = ET.SubElement(suites, "testsuite", name=_text(path))
            counts[path] = [0, 0, 0]
        return by_file[path]

    for diagnostic in report.diagnostics:
        path = display_path(diagnostic.path, root)
        where = diagnostic.location
        attributes = {
            "name": f"offlint.{diagnostic.code}",
            "classname": _text(path),
            "line": str(where.line),
            "column": str(where.column),
        }
        if diagnostic.cell is not None:
            attributes["cell"] = str(diagnostic.cell)
        case = ET.SubElement(suite(path), "testcase", attributes)
        failure = ET.SubElement(case, "failure", message=_text(diagnostic.message), type=diagnostic.code)
        failure.text = _text(f"{path}:{diagnostic.position}: {diagnostic.code} {diagnostic.message}")
        counts[path][0] += 1
        counts[path][1] += 1
    for error in report.all_errors:
        path = display_path(error.path, root)
        case = ET.SubElement(suite(path), "testcase", name=f"offlint.{error.kind.value}", classname=_text(path))
        failed = ET.SubElement(case, "error", message=_text(error.message), type=error.kind.value)
        failed.text = _text(error.one_line())
        counts[path][0] += 1
        counts[path][2] += 1
    if not by_file:
        clean = ET.SubElement(suites, "testsuite", name="offlint")
        ET.SubElement(clean, "testcase", name="offlint", classname="offlint")
        counts["offlint"] = [1, 0, 0]
        by_file["offlint"] = clean
    for path, element in by_file.items():
        tests, failures, errors = counts[path]
        element.set("tests", str(tests))
        element.set("failures", str(failures))
        element.set("errors", str(errors))
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    suites.set("tests", str(totals[0]))
    suites.set("failures", str(totals[1]))
    suites.set("errors", str(totals[2]))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
