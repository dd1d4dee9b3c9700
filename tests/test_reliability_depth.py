"""Deep, long and broken sources never crash, hang or traceback `check` or `fix --apply`, and a
bad file never stops the others (issue 15, items 1, 2 and 4).

The inputs that used to kill the process run in a child, so a regression fails one test instead
of the session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from offlint.analysis.deep_stack import on_deep_stack
from offlint.analysis.engine import FileSettings
from offlint.analysis.guard import refusal
from offlint.catalogue import load_catalogue
from offlint.diagnostics import FileReport
from offlint.fixing import apply, loop
from offlint.fixing.apply import FIXABLE_RULES, FixSettings, changed_outside
from offlint.fixing.loop import fix_source
from offlint.pipeline import check as run

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sglang_offloader_original.py"
ALL = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)


def _offlint(*args: str, cwd: Path, timeout: float = 120) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "offlint", *args],
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1"},
    )
    return done.returncode, done.stdout.decode() + done.stderr.decode()


# legal code, fixable, with one expression that recursed past Python's limit in libcst's visitors
DEEP_BUT_LEGAL = {
    "plus-400": "_Z = " + " + ".join(["1"] * 400),
    "attribute-400": "_Z = a" + ".b" * 400,
    "lists-190": "_Z = " + "[" * 190 + "]" * 190,
    "and-999": "_Z = " + " and ".join(["a"] * 999),
}


@pytest.mark.parametrize("extra", DEEP_BUT_LEGAL.values(), ids=DEEP_BUT_LEGAL.keys())
def test_fix_apply_fixes_a_fixable_file_with_a_deep_expression(tmp_path: Path, extra: str) -> None:
    target = tmp_path / "deep.py"
    target.write_text(FIXTURE.read_text() + "\n" + extra + "\n")
    code, out = _offlint("fix", "--apply", "--exit-zero", "deep.py", cwd=tmp_path)
    assert "Traceback" not in out and "RecursionError" not in out, out[-3000:]
    assert code == 0, out[-3000:]
    fixed = target.read_text()
    assert fixed != FIXTURE.read_text() + "\n" + extra + "\n"
    assert fixed.endswith(extra + "\n")  # the deep line is kept as it was
    compile(fixed, "deep.py", "exec")


def test_broken_deep_files_are_one_syntax_line_and_never_reach_libcst(tmp_path: Path) -> None:
    # CPython reports the indentation error; libcst's parser then ran for minutes and overflowed
    # its stack (exit 139) on the first, and took 21 s on the second
    (tmp_path / "chain.py").write_text(
        "import torch\ns = torch.cuda.Stream()\n_A = torch" + ".cuda" * 40000 + "\n  x = 1\n"
    )
    (tmp_path / "subs.py").write_text("import torch\ns = torch.cuda.Stream()\n_D = x" + "[0]" * 2000 + "\n  x = 1\n")
    (tmp_path / "good.py").write_text(FIXTURE.read_text())
    started = time.monotonic()
    code, out = _offlint("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert time.monotonic() - started < 60
    assert code == 2, out
    assert "Traceback" not in out
    assert [line for line in out.splitlines() if line.startswith("chain.py")] == [
        "chain.py:4:2: syntax-error: unexpected indent"
    ]
    assert [line for line in out.splitlines() if line.startswith("subs.py")] == [
        "subs.py:4:2: syntax-error: unexpected indent"
    ]
    assert "good.py:" in out  # the others are still checked


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("_D = x" + "[0]" * 4000, "chain of 4000 attributes, subscripts and calls"),
        ("_D = (x\n" + ".cuda\n" * 6000 + ")", "chain of 6000 attributes"),  # no long line, split chain
        ("_D = " + " + ".join(["1"] * 3000), "nested"),
    ],
    ids=["subscripts", "attributes-over-lines", "operators"],
)
def test_chains_libcst_parses_in_quadratic_time_are_refused(source: str, fragment: str) -> None:
    text = FIXTURE.read_text() + "\n" + source + "\n"
    refused = on_deep_stack(lambda: refusal(text))  # as check and fix run it
    assert refused is not None and refused.kind == "deep"
    assert fragment in refused.message


def test_fix_error_boundary_covers_applying_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    # resolving positions and applying a plan used to run outside the boundary
    def explode(self: object, module: object) -> object:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(apply.StatementPlan, "apply", explode)
    data = FIXTURE.read_bytes()
    result = fix_source(data, "f.py", FixSettings(select=ALL))
    assert result.fixed == data
    # a plan that cannot be written is no fix: each finding it was for is left, saying so
    assert result.not_fixed and all("fix could not be written" in n.reason for n in result.not_fixed)
    assert all("\n" not in n.reason for n in result.not_fixed)


def test_fix_error_boundary_covers_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: object, **kwargs: object) -> object:
        raise RuntimeError("a bug\nwith two lines")

    monkeypatch.setattr(loop, "check_source", explode)
    data = FIXTURE.read_bytes()
    result = fix_source(data, "f.py", FixSettings(select=ALL))
    assert result.fixed == data and not result.changed
    assert [e.one_line() for e in result.errors] == ["f.py: internal-error: RuntimeError: a bug"]


def test_a_crashing_worker_fails_only_its_file(monkeypatch: pytest.MonkeyPatch) -> None:
    real = run.check_source

    def crash_on_one(data: bytes, display: str, settings: FileSettings, **kwargs: bool) -> FileReport:
        if display == "crash.py":
            os.kill(os.getpid(), signal.SIGKILL)  # as a native crash would end it
        return real(data, display, settings, **kwargs)

    monkeypatch.setattr(run, "check_source", crash_on_one)  # the forked workers inherit it
    settings = FileSettings(select=frozenset(load_catalogue()))
    data = FIXTURE.read_bytes()
    jobs = [(data, name, settings) for name in ("a.py", "crash.py", "b.py", "c.py")]
    pool = run._Pool(2)
    try:
        reports = {r.path: r for r in pool.run(jobs)}
    finally:
        pool.close()
    assert sorted(reports) == ["a.py", "b.py", "c.py", "crash.py"]
    assert [e.one_line() for e in reports["crash.py"].errors] == [
        "crash.py: internal-error: the process analysing this file crashed"
    ]
    for name in ("a.py", "b.py", "c.py"):
        assert not reports[name].errors and reports[name].diagnostics


# ---- bytes outside the edits (item 4) ------------------------------------------------------


@pytest.mark.parametrize(
    "mangle",
    [
        lambda data: data.replace(b"\nclass", b"\n\x0cclass", 1),  # form feed at a line start
        lambda data: data + b"\r",  # a lone CR at the end
        lambda data: data + b"\n\n   ",  # blank lines before a whitespace-only last line
    ],
    ids=["form-feed", "lone-cr", "whitespace-last-line"],
)
def test_a_file_libcst_does_not_round_trip_is_not_fixed(mangle: Callable[[bytes], bytes]) -> None:
    data = mangle(FIXTURE.read_bytes())
    result = fix_source(data, "f.py", FixSettings(select=ALL))
    assert result.fixed == data
    assert len(result.errors) == 1
    assert "does not reproduce this file byte for byte" in result.errors[0].one_line()


def test_changed_outside_finds_a_change_between_edits() -> None:
    before = b"a\nb\nc\nd\ne\n"
    assert changed_outside(before, b"a\nB1\nB2\nc\nd\ne\n", [(2, 2)]) is None
    assert changed_outside(before, b"a\nB1\nc\nD\ne\n", [(2, 2)]) == 3  # line 4 changed: stretch 3-5
    assert changed_outside(before, b"a\nb\nc\nd\ne", [(2, 2)]) == 3  # the last newline lost
    assert changed_outside(before, b"\x0ca\nb\nc\nd\ne\n", [(3, 3)]) == 1
    assert changed_outside(before, b"a\nb\nc\nd\ne\nX\n", [(5, 5)]) is None  # inserted after an anchor
    assert changed_outside(before, b"a\nb\nX\nc\nd\ne\n", [(1, 1), (4, 5)]) == 2


def test_the_deep_stack_takes_deep_recursion_and_hands_back_errors() -> None:
    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    assert on_deep_stack(lambda: depth(20_000)) == 20_000  # past the default limit of 1 000
    with pytest.raises(ValueError, match="from the worker"):
        on_deep_stack(lambda: (_ for _ in ()).throw(ValueError("from the worker")))
    assert sys.getrecursionlimit() < 20_000  # the limit is raised only while the work runs


def test_the_deep_stack_works_in_a_forked_child() -> None:
    on_deep_stack(lambda: None)  # the parent's thread exists now
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if on_deep_stack(lambda: 42) == 42 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
