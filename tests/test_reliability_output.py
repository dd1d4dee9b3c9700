"""Every output format stays valid, one-line-per-finding UTF-8 whatever a file is called: a name
that is not UTF-8, or that holds a newline (issue 15, item 7)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from offlint.reporting._sources import printable
from offlint.reporting.json_format import dumps

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sglang_offloader_original.py"
ODD_NAMES = [b"caf\xff.py", b"new\nline.py", b"tab\there.py", b"100% sure.py"]
SHOWN = {"caf\\xff.py", "new\\nline.py", "tab\\there.py", "100% sure.py"}


@pytest.fixture
def odd_tree(tmp_path: Path) -> Path:
    data = FIXTURE.read_bytes()
    try:
        for name in ODD_NAMES:
            with open(os.path.join(os.fsencode(tmp_path), name), "wb") as handle:
                handle.write(data)
    except (OSError, UnicodeError):
        pytest.skip("this file system does not take such names")
    return tmp_path


def _run(cwd: Path, *args: str) -> tuple[int, bytes, bytes]:
    done = subprocess.run(
        [sys.executable, "-m", "offlint", *args],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"},
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("output_format", ["concise", "full", "json", "offlint-json", "sarif", "github", "grouped", "rdjson", "azure"])
def test_every_format_is_valid_utf8_with_odd_file_names(odd_tree: Path, output_format: str) -> None:
    code, out, err = _run(odd_tree, "check", "--no-cache", "--output-format", output_format, ".")
    assert code == 1, err.decode(errors="replace")
    assert b"Traceback" not in err
    text = out.decode("utf-8")  # raises on invalid UTF-8
    assert text
    if output_format == "concise":  # no name splits a line
        assert {re.sub(r":[0-9]+:[0-9]+: OFL[0-9]+ .*", "", line) for line in text.splitlines()} == SHOWN
    if output_format == "offlint-json":
        assert {d["filename"] for d in json.loads(text)["diagnostics"]} == SHOWN
    if output_format == "sarif":
        document = json.loads(text)
        uris = {
            location["physicalLocation"]["artifactLocation"]["uri"]
            for result in document["runs"][0]["results"]
            for location in result["locations"]
        }
        assert uris == {"caf%FF.py", "new%0Aline.py", "tab%09here.py", "100%25%20sure.py"}
    if output_format == "github":
        assert all(line.startswith("::") for line in text.splitlines())


def test_fix_output_escapes_odd_file_names(odd_tree: Path) -> None:
    code, out, err = _run(odd_tree, "fix", ".")
    assert code == 1, err.decode(errors="replace")
    diff = out.decode("utf-8")
    assert "--- a/caf\\xff.py\n" in diff and "--- a/new\\nline.py\n" in diff
    assert all(not line.startswith("line.py") for line in err.decode("utf-8").splitlines())
    code, out, err = _run(odd_tree, "fix", "--output-format", "json", ".")
    paths = {f["path"] for f in json.loads(out.decode("utf-8"))["files"]}
    assert "caf\\xff.py" in paths and "new\\nline.py" in paths


def test_printable_escapes_only_what_must_be() -> None:
    assert printable("pkg/é offload.py") == "pkg/é offload.py"
    assert printable("caf\udcff.py") == "caf\\xff.py"
    assert printable("a\nb\rc\x1bd\u2028e") == "a\\nb\\rc\\x1bd\\u2028e"


def test_json_dumps_never_writes_invalid_utf8() -> None:
    text = dumps({"message": "cannot read caf\udcff.py", "row": 1})
    text.encode("utf-8")
    assert json.loads(text)["message"] == "cannot read caf\\xff.py"
