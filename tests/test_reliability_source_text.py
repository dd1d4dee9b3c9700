"""Source text offlint cannot or need not judge (issue 15, item 10):

- UTF-16 and UTF-32 files are refused as CPython refuses them (PEP 263: source must be in an
  ASCII-compatible encoding), with a line that says so, not "binary file";
- the warnings CPython's parser and compiler give about a user's code (an invalid escape sequence,
  `is` with a literal) never reach offlint's stderr, and under `-W error` never make valid code a
  syntax error.
"""

from __future__ import annotations

import codecs
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from offlint.analysis.engine import DecodeError, decode_source
from offlint.analysis.guard import SCREEN_LINE, parse_with_cpython, refusal
from offlint.catalogue import load_catalogue
from offlint.fixing.apply import FixSettings
from offlint.fixing.loop import fix_source

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sglang_offloader_original.py"
SOURCE = "import torch\n\n\ndef f(x):\n    return x\n"
WIDE = {
    "utf-16 with BOM (LE)": (codecs.BOM_UTF16_LE + SOURCE.encode("utf-16-le"), "UTF-16"),
    "utf-16 with BOM (BE)": (codecs.BOM_UTF16_BE + SOURCE.encode("utf-16-be"), "UTF-16"),
    "utf-16 without BOM (LE)": (SOURCE.encode("utf-16-le"), "UTF-16"),
    "utf-16 without BOM (BE)": (SOURCE.encode("utf-16-be"), "UTF-16"),
    "utf-32 with BOM": (SOURCE.encode("utf-32"), "UTF-32"),
    "a utf-16 coding declaration": (b"# -*- coding: utf-16 -*-\n" + SOURCE.encode(), "'utf-16'"),
}
# a user's code CPython warns about: an invalid escape sequence and `is` with a literal
WARNED = '\n\ndef _odd(x):\n    if x is 1:\n        return "\\d+"\n    return x\n'


def _run(cwd: Path, *args: str, python_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *python_flags, "-m", "offlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )


@pytest.mark.parametrize("case", sorted(WIDE))
def test_wide_encodings_are_refused_as_python_refuses_them(case: str) -> None:
    data, named = WIDE[case]
    with pytest.raises((SyntaxError, ValueError)):  # CPython itself: not source code
        compile(data, "wide.py", "exec")
    with pytest.raises(DecodeError) as refused:
        decode_source(data)
    message = str(refused.value)
    assert named in message and "binary" not in message
    assert "Python does not accept" in message and "UTF-8" in message


def test_binary_and_valid_encodings_are_told_apart() -> None:
    with pytest.raises(DecodeError, match="binary"):
        decode_source(b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00")
    assert decode_source(codecs.BOM_UTF8 + SOURCE.encode()) == SOURCE
    latin = "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n"
    assert decode_source(latin.encode("latin-1")) == latin


def test_check_names_utf16_files(tmp_path: Path) -> None:
    (tmp_path / "wide.py").write_bytes(codecs.BOM_UTF16_LE + FIXTURE.read_text(encoding="utf-8").encode("utf-16-le"))
    done = _run(tmp_path, "check", "--no-cache", "wide.py")
    assert done.returncode == 2, done.stderr
    assert "wide.py: undecodable: UTF-16 text, which Python does not accept" in done.stdout + done.stderr
    assert "binary" not in done.stdout + done.stderr and "Traceback" not in done.stderr


def test_no_warning_about_the_users_code_is_printed(tmp_path: Path) -> None:
    (tmp_path / "w.py").write_bytes(FIXTURE.read_bytes() + WARNED.encode())
    for command in (("check", "--no-cache", "w.py"), ("fix", "w.py")):
        done = _run(tmp_path, *command, python_flags=("-W", "always"))
        assert done.returncode == 1, done.stderr
        assert "Warning" not in done.stderr, done.stderr


def test_warnings_as_errors_do_not_make_valid_code_a_syntax_error() -> None:
    # long enough for the deep-nesting screen to hand it to CPython's parser first
    text = FIXTURE.read_text(encoding="utf-8") + WARNED + "_PAD = '" + "x" * SCREEN_LINE + "'\n"
    data = text.encode()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert refusal(text) is None
        tree, problem = parse_with_cpython(text)
        assert tree is not None and problem is None
        fixed = fix_source(data, "w.py", FixSettings(select=frozenset(load_catalogue())))
    assert fixed.errors == [] and fixed.changed
    assert WARNED.encode() in fixed.fixed
