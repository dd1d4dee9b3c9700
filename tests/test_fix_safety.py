"""`offlint fix --apply` never loses a byte: atomic writes, permissions kept, files changed on disk
meanwhile left alone, read-only files refused, concurrent runs safe, CRLF/BOM/whitespace kept."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from offlint.catalogue import load_catalogue
from offlint.cli import main
from offlint.fixing.apply import FIXABLE_RULES, FixSettings
from offlint.fixing.loop import fix_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SELECT = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)


def _fixable() -> list[Path]:
    """Fixtures `fix` changes (the others serve as untouched bystanders)."""
    found = []
    for path in sorted(FIXTURES.glob("*.py")):
        data = path.read_bytes()
        if fix_source(data, path.name, FixSettings(select=SELECT)).fixed != data:
            found.append(path)
    return found


FIXABLE = _fixable()


def _fixed(data: bytes, name: str = "f.py") -> bytes:
    result = fix_source(data, name, FixSettings(select=SELECT))
    assert not result.errors, [e.one_line() for e in result.errors]
    return result.fixed


def _cli(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.output


def test_there_is_something_to_fix() -> None:
    assert len(FIXABLE) >= 2


def test_apply_writes_fixed_bytes_keeps_mode_leaves_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i, src in enumerate(FIXABLE):
        target = tmp_path / src.name
        shutil.copyfile(src, target)
        os.chmod(target, (0o640, 0o755, 0o600, 0o664)[i % 4])
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    monkeypatch.chdir(tmp_path)
    # --exit-zero: some fixtures keep hazards no fix removes (the zoo's host sync); this is about writing
    code, out = _cli(["fix", "--apply", "--exit-zero", "."])
    assert code == 0, out
    for src in FIXABLE:
        target = tmp_path / src.name
        assert target.read_bytes() == _fixed(src.read_bytes(), src.name)
        assert stat.S_IMODE(target.stat().st_mode) == modes[src.name]
        cst.parse_module(target.read_bytes())
    # no temporary left behind (the cache is check's, which fix runs for the whole tree's facts)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".offlint_cache") == sorted(modes)


def test_write_failure_keeps_original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = FIXABLE[0]
    target = tmp_path / src.name
    shutil.copyfile(src, target)

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    monkeypatch.chdir(tmp_path)
    code, out = _cli(["fix", "--apply", "."])
    assert code == 2, out
    assert f"{src.name}: write-failed: No space left on device" in out
    assert target.read_bytes() == src.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == [src.name]


def test_read_only_file_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked, free = FIXABLE[0], FIXABLE[1]
    shutil.copyfile(locked, tmp_path / locked.name)
    shutil.copyfile(free, tmp_path / free.name)
    os.chmod(tmp_path / locked.name, 0o444)
    monkeypatch.chdir(tmp_path)
    code, out = _cli(["fix", "--apply", "."])
    assert code == 2, out
    lines = [line for line in out.splitlines() if f"{locked.name}: write-failed" in line]
    assert len(lines) == 1 and "read-only" in lines[0], out
    assert (tmp_path / locked.name).read_bytes() == locked.read_bytes()
    assert stat.S_IMODE((tmp_path / locked.name).stat().st_mode) == 0o444
    assert (tmp_path / free.name).read_bytes() == _fixed(free.read_bytes(), free.name)  # others still fixed


def test_changed_on_disk_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import offlint.fixing.loop as apply_module

    src = FIXABLE[0]
    target = tmp_path / src.name
    shutil.copyfile(src, target)
    edited = src.read_bytes() + b"# edited by someone else meanwhile\n"
    real = apply_module.fix_source

    def fix_while_someone_edits(data, path, settings):
        result = real(data, path, settings)
        target.write_bytes(edited)  # after offlint read the file, before it writes
        return result

    monkeypatch.setattr(apply_module, "fix_source", fix_while_someone_edits)
    monkeypatch.chdir(tmp_path)
    code, out = _cli(["fix", "--apply", "."])
    assert code == 2, out
    assert f"{src.name}: changed-on-disk" in out, out
    assert target.read_bytes() == edited


def _dress(text: bytes, *, crlf: bool, bom: bool, final_newline: bool) -> bytes:
    lines = text.split(b"\n")
    # trailing whitespace on comment/blank lines far from any edit
    lines = [line + b"   " if line.startswith(b"#") else line for line in lines]
    data = (b"\r\n" if crlf else b"\n").join(lines)
    if not final_newline:
        data = data.rstrip(b"\r\n")
    return (b"\xef\xbb\xbf" if bom else b"") + data


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("bom", [False, True], ids=["nobom", "bom"])
@pytest.mark.parametrize("final_newline", [True, False], ids=["eol", "noeol"])
def test_newlines_bom_whitespace_survive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crlf: bool, bom: bool, final_newline: bool) -> None:
    src = FIXABLE[0]
    plain_fixed = _fixed(src.read_bytes(), src.name)
    data = _dress(src.read_bytes(), crlf=crlf, bom=bom, final_newline=final_newline)
    target = tmp_path / src.name
    target.write_bytes(data)
    monkeypatch.chdir(tmp_path)
    code, out = _cli(["fix", "--apply", "."])
    assert code == 0, out
    written = target.read_bytes()
    assert written == _dress(plain_fixed, crlf=crlf, bom=bom, final_newline=final_newline)
    if crlf:
        assert b"\n" not in written.replace(b"\r\n", b"")
    assert written.startswith(b"\xef\xbb\xbf") == bom


def test_two_concurrent_fix_runs(tmp_path: Path) -> None:
    """Two real `offlint fix --apply` processes on one tree: every file ends either untouched
    or fully fixed, and parses."""
    tree = tmp_path / "tree"
    tree.mkdir()
    expected: dict[str, tuple[bytes, bytes]] = {}
    for copy in range(6):
        for src in sorted(FIXTURES.glob("*.py")):
            name = f"{src.stem}_{copy}.py"
            data = src.read_bytes()
            (tree / name).write_bytes(data)
            expected[name] = (data, _fixed(data, name))
    env = {**os.environ, "NO_COLOR": "1"}
    for _attempt in range(2):
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "offlint", "fix", "--apply", "tree"],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        outputs = [p.communicate(timeout=300) for p in procs]
        for proc, (out, err) in zip(procs, outputs, strict=True):
            # 1: hazards that no fix removes are left (the zoo holds some), and say so
            assert proc.returncode in (0, 1, 2), err.decode()[-2000:]
            text = (out + err).decode()
            assert "Traceback" not in text
            for line in text.splitlines():  # the only acceptable error: the other run won
                if "write-failed" in line or "internal-error" in line:
                    pytest.fail(line)
        for name, (original, fixed) in expected.items():
            now = (tree / name).read_bytes()
            assert now in (original, fixed), name
            cst.parse_module(now)
        assert sorted(p.name for p in tree.iterdir()) == sorted(expected)
    # after two full rounds nothing is left unfixed
    assert all((tree / name).read_bytes() == fixed for name, (_, fixed) in expected.items())
