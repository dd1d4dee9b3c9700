"""offlint never crashes on bad input: each bad file gets one line naming it and the reason, the
run exits 2, and every other file is still checked. Valid-but-unusual files (BOM, CRLF, tabs,
empty) are checked normally."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.cli import main
from offlint.diagnostics import ErrorKind

ALL = frozenset(load_catalogue())

# passes the prefilter and yields one OFL105 on line 9
OFFLOADER = (
    "import torch\n"
    "\n"
    "\n"
    "class Offloader(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        self.alt_stream = torch.cuda.Stream()\n"
    "\n"
    "    def forward(self):\n"
    "        self.alt_stream.synchronize()\n"
    "        return 1\n"
)


def _check(data: bytes, name: str = "f.py"):
    return check_source(data, name, FileSettings(select=ALL))


def _found(data: bytes) -> list[tuple[int, str]]:
    report = _check(data)
    assert not report.errors, [e.one_line() for e in report.errors]
    return sorted((d.location.line, d.code) for d in report.diagnostics)


def _offlint(*args: str, cwd: Path, stdin: bytes | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "offlint", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, "PYTHONHASHSEED": "0", "NO_COLOR": "1"},
    )


# ---- valid Python in unusual clothes: checked normally --------------------------------------


def test_bom_crlf_tabs_cookie_are_checked_normally() -> None:
    plain = _found(OFFLOADER.encode())
    assert plain == [(9, "OFL105")]
    assert _found(b"\xef\xbb\xbf" + OFFLOADER.encode()) == plain
    assert _found(OFFLOADER.replace("\n", "\r\n").encode()) == plain
    assert _found(OFFLOADER.replace("    ", "\t").encode()) == plain
    latin = "# -*- coding: latin-1 -*-\n" + OFFLOADER.replace("return 1", "return 'é'")
    assert _found(latin.encode("latin-1")) == [(10, "OFL105")]
    assert _found(b"\xef\xbb\xbf" + OFFLOADER.replace("\n", "\r\n").encode()) == plain


def test_empty_and_whitespace_only_files_are_clean() -> None:
    for data in (b"", b"\n", b"\r\n", b"   \n\t\n", b"\xef\xbb\xbf", b"# just a comment"):
        report = _check(data)
        assert not report.errors and not report.diagnostics, data


# ---- bad input: one error each, never an exception --------------------------------------------


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        pytest.param((OFFLOADER + "print 'py2'\n").encode(), ErrorKind.SYNTAX, id="python2"),
        pytest.param((OFFLOADER + "def f(:\n    pass\n").encode(), ErrorKind.SYNTAX, id="syntax"),
        pytest.param(
            b"# -*- coding: ascii -*-\n" + OFFLOADER.encode() + b"x = '\xc3\xa9'\n",
            ErrorKind.UNDECODABLE,
            id="cookie-mismatch",
        ),
        pytest.param(b"# coding: no-such-codec\n" + OFFLOADER.encode(), ErrorKind.UNDECODABLE, id="bad-cookie"),
        pytest.param(
            b"\xef\xbb\xbf# coding: latin-1\n" + OFFLOADER.encode(), ErrorKind.UNDECODABLE, id="bom-vs-cookie"
        ),
        pytest.param(OFFLOADER.encode() + b"x = '\xff\xfe'\n", ErrorKind.UNDECODABLE, id="undecodable"),
        pytest.param(OFFLOADER.encode() + b"\x00\x01\x02binary", ErrorKind.UNDECODABLE, id="binary"),
        pytest.param((OFFLOADER + "x = " + "[" * 5000 + "]" * 5000 + "\n").encode(), ErrorKind.TOO_DEEP, id="brackets"),
        pytest.param((OFFLOADER + "x = " + "not " * 30000 + "1\n").encode(), ErrorKind.TOO_DEEP, id="unary-chain"),
        pytest.param(
            (OFFLOADER + "x = (" + "\n+ ".join(["a"] * 10000) + ")\n").encode(), ErrorKind.TOO_DEEP, id="operator-chain"
        ),
        pytest.param(
            (OFFLOADER + "x = (" + "\nand ".join(["a"] * 30000) + ")\n").encode(), ErrorKind.TOO_DEEP, id="and-chain"
        ),
        pytest.param(
            (OFFLOADER + "if x:\n    pass\n" + "elif x:\n    pass\n" * 30000).encode(), ErrorKind.TOO_DEEP, id="elif-chain"
        ),
        pytest.param(
            (OFFLOADER + "".join("    " * d + "if x:\n" for d in range(120)) + "    " * 120 + "pass\n").encode(),
            ErrorKind.TOO_DEEP,
            id="indentation",
        ),
    ],
)
def test_bad_source_is_one_error_not_a_crash(data: bytes, kind: ErrorKind) -> None:
    # the deep inputs used to kill the process (SIGSEGV in libcst's native parser): run them in
    # a child so a regression fails this test instead of the whole session
    code = (
        "import sys\n"
        "from offlint.analysis.engine import FileSettings, check_source\n"
        "from offlint.catalogue import load_catalogue\n"
        "r = check_source(sys.stdin.buffer.read(), 'bad.py', FileSettings(select=frozenset(load_catalogue())))\n"
        "print(len(r.diagnostics))\n"
        "for e in r.errors: print(e.kind.value, e.one_line())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "0"
    assert len(lines) == 2, lines
    assert lines[1].startswith(f"{kind.value} bad.py"), lines


def test_big_generated_file_is_checked() -> None:
    row = "x{} = [" + ", ".join(["0.123456789"] * 30) + "]\n"
    data = "".join(row.format(i) for i in range(51_000)).encode()
    assert len(data) > 20_000_000
    report = _check(data)  # no hazard token: the prefilter settles it without parsing
    assert not report.errors and not report.diagnostics and not report.parsed
    report = _check(OFFLOADER.encode() + data[: data.index(b"\n", 1_000_000) + 1])  # a parsed megabyte
    assert not report.errors
    assert [(d.location.line, d.code) for d in report.diagnostics] == [(9, "OFL105")]


# ---- the command line: a tree full of bad files --------------------------------------------


def _bad_tree(root: Path) -> dict[str, str]:
    """Write bad files below root; map of file name -> expected error kind."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "good.py").write_text(OFFLOADER)
    (root / "bom.py").write_bytes(b"\xef\xbb\xbf" + OFFLOADER.encode())
    (root / "crlf.py").write_bytes(OFFLOADER.replace("\n", "\r\n").encode())
    (root / "empty.py").write_bytes(b"")
    expected = {
        "py2.py": "syntax-error",
        "cookie.py": "undecodable",
        "binary.py": "undecodable",
        "deep.py": "too-deeply-nested",
        "loop1.py": "unreadable",
        "loop2.py": "unreadable",
        "dangling.py": "unreadable",
        "fifo.py": "unreadable",
    }
    (root / "py2.py").write_text(OFFLOADER + "print 'hello'\n")
    (root / "cookie.py").write_bytes(b"# coding: ascii\n" + OFFLOADER.encode() + b"x = '\xc3\xa9'\n")
    (root / "binary.py").write_bytes(bytes(range(256)) * 40)
    (root / "deep.py").write_text(OFFLOADER + "x = " + "(" * 3000 + ")" * 3000 + "\n")
    os.symlink("loop2.py", root / "loop1.py")
    os.symlink("loop1.py", root / "loop2.py")
    os.symlink("nowhere.py", root / "dangling.py")
    os.mkfifo(root / "fifo.py")  # reading it would block forever
    (root / "sub").mkdir()
    os.symlink("..", root / "sub" / "up")  # a folder loop: never followed
    return expected


def test_cli_bad_tree_one_line_each_others_checked(tmp_path: Path) -> None:
    expected = _bad_tree(tmp_path / "tree")
    done = _offlint("check", "--select", "ALL", "--no-cache", "--output-format", "concise", "tree", cwd=tmp_path)
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 2, out
    assert "Traceback" not in out
    for name, kind in expected.items():
        lines = [line for line in out.splitlines() if line.startswith(f"tree/{name}:")]
        assert len(lines) == 1, (name, out)
        assert f" {kind}: " in lines[0], lines
    for good in ("good.py", "bom.py", "crlf.py"):
        assert f"tree/{good}:9:9: OFL105" in out, out
    assert "tree/empty.py" not in out


def test_cli_symlink_loop_named_explicitly(tmp_path: Path) -> None:
    os.symlink("b.py", tmp_path / "a.py")
    os.symlink("a.py", tmp_path / "b.py")
    (tmp_path / "good.py").write_text(OFFLOADER)
    done = _offlint("check", "--no-cache", "a.py", "good.py", cwd=tmp_path)
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in out
    assert out.count("a.py:") == 1 and "good.py:9:9" in out


def test_cli_stdin_not_python(tmp_path: Path) -> None:
    for data, kind in ((b"\x00\xff binary", "undecodable"), ((OFFLOADER + "def (:\n").encode(), "syntax-error")):
        done = _offlint("check", "--no-cache", "--stdin-filename", "in.py", "-", cwd=tmp_path, stdin=data)
        out = done.stdout.decode() + done.stderr.decode()
        assert done.returncode == 2, out
        assert "Traceback" not in out
        assert [line for line in out.splitlines() if line.startswith("in.py") and kind in line], out


@pytest.mark.parametrize(
    "toml",
    [
        "[tool.offlint\nselect = [",  # not TOML
        "[tool.offlint]\nselect = ['NOPE']\n",  # not a rule
        "[tool.offlint]\nno-such-key = 1\n",
        "[tool.offlint]\nselect = 3\n",
        b"[tool.offlint]\nselect = ['\xff']\n",  # not UTF-8
    ],
)
def test_cli_bad_pyproject_is_one_line(tmp_path: Path, toml: str | bytes) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_bytes(toml if isinstance(toml, bytes) else toml.encode())
    (project / "a.py").write_text(OFFLOADER)
    done = _offlint("check", "--no-cache", "proj", cwd=tmp_path)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err + done.stdout.decode()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "pyproject.toml" in lines[0], lines


# ---- unreadable files and folders, vanishing paths (in-process, works as root) ---------------


def _run_cli(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.output  # click >= 8.2: stdout and stderr, interleaved


def test_unreadable_file_and_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "locked.py").write_text(OFFLOADER)
    (tmp_path / "good.py").write_text(OFFLOADER)
    (tmp_path / "closed").mkdir()
    (tmp_path / "closed" / "inside.py").write_text(OFFLOADER)
    if os.geteuid() != 0:  # the real thing where permissions bind
        os.chmod(tmp_path / "locked.py", 0)
        os.chmod(tmp_path / "closed", 0)
    else:  # root reads everything: make the kernel's answer explicit
        real_open, real_scandir = os.open, os.scandir

        def deny_open(path, *args, **kwargs):
            if str(path).endswith("locked.py"):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        def deny_scandir(path="."):
            if str(path).endswith("closed"):
                raise PermissionError(13, "Permission denied", str(path))
            return real_scandir(path)

        monkeypatch.setattr(os, "open", deny_open)
        monkeypatch.setattr(os, "scandir", deny_scandir)
    monkeypatch.chdir(tmp_path)
    try:
        code, out = _run_cli(["check", "--no-cache", "-j", "1", "--output-format", "concise", "."])
    finally:
        os.chmod(tmp_path / "locked.py", 0o644)
        os.chmod(tmp_path / "closed", 0o755)
    assert code == 2, out
    assert "locked.py: unreadable: Permission denied" in out
    assert "closed: unreadable: Permission denied" in out
    assert "good.py:9:9: OFL105" in out


def test_path_vanishing_mid_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import offlint.pipeline.check as run_module

    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(OFFLOADER)
    real_discover = run_module.discover

    def discover_then_delete(*args, **kwargs):
        found = real_discover(*args, **kwargs)
        (tmp_path / "b.py").unlink()  # after discovery, before it is read
        return found

    monkeypatch.setattr(run_module, "discover", discover_then_delete)
    monkeypatch.chdir(tmp_path)
    code, out = _run_cli(["check", "--no-cache", "-j", "1", "--output-format", "concise", "."])
    assert code == 2, out
    assert "b.py: missing-path:" in out
    assert "a.py:9:9: OFL105" in out and "c.py:9:9: OFL105" in out


def test_missing_path_on_command_line(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(OFFLOADER)
    done = _offlint("check", "--no-cache", "nope.py", "good.py", cwd=tmp_path)
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 2 and "nope.py: missing-path" in out and "good.py:9:9" in out


# ---- internal errors: reported, counted, exit 2, never a traceback --------------------------


def test_internal_error_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from offlint.analysis.rules import all_rules

    rule = all_rules()["OFL105"]

    def explode(self, model):
        if "boom" in model.module_functions:
            raise ValueError("rule exploded\nsecond line")
        yield from original(self, model)

    original = rule.find
    monkeypatch.setattr(rule, "find", explode)
    (tmp_path / "boom.py").write_text(OFFLOADER + "\n\ndef boom():\n    pass\n")
    (tmp_path / "good.py").write_text(OFFLOADER)
    monkeypatch.chdir(tmp_path)
    code, out = _run_cli(["check", "--no-cache", "-j", "1", "--output-format", "concise", "."])
    assert code == 2, out
    assert "Traceback" not in out
    lines = [line for line in out.splitlines() if line.startswith("boom.py")]
    assert lines == ["boom.py: internal-error: ValueError: rule exploded"], out
    assert "good.py:9:9: OFL105" in out
    assert "1 file could not be checked" in out


def test_cli_fix_bad_tree_one_line_each(tmp_path: Path) -> None:
    expected = _bad_tree(tmp_path / "tree")
    (tmp_path / "tree" / "deeper.py").write_text(OFFLOADER + "x = " + "not " * 30000 + "1\n")  # SIGSEGV before
    expected["deeper.py"] = "too-deeply-nested"
    before = {p.name: p.read_bytes() for p in (tmp_path / "tree").iterdir() if p.is_file() and p.name != "fifo.py"}
    done = _offlint("fix", "--apply", "tree", cwd=tmp_path)
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 2, out
    assert "Traceback" not in out
    for name, kind in expected.items():
        lines = [line for line in out.splitlines() if f"tree/{name}:" in line and f" {kind}: " in line]
        assert len(lines) == 1, (name, out)
    for name, data in before.items():  # nothing broken was written
        if name not in ("good.py", "bom.py", "crlf.py"):
            assert (tmp_path / "tree" / name).read_bytes() == data, name
