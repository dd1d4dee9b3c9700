"""Faults on every writer (issue 36): a full disk (ENOSPC) and a read-only file system (EROFS)
during `fix --apply`, `check --fix`, `check --add-noqa`, `check --write-baseline` and the cache
write leave the original intact and no temporary file, and say so in one line with exit code 2
(a cache that cannot be written: one warning line, the run's own exit code: the results are
right, only the next run is slower). A cache written by another offlint version is ignored and
rebuilt. The faults are injected where every writer goes through: `os.open` with O_CREAT
(EROFS: the file system refuses to create), the handles `os.fdopen` gives for writing (ENOSPC:
every write fails) and `os.replace`/`os.rename`."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from offlint.cli import main

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "group_offload_record_stream.py"


class _Full:
    """A write handle on a full disk: every write fails with ENOSPC."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def write(self, _data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __enter__(self) -> _Full:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()


@contextlib.contextmanager
def fault(kind: int) -> Iterator[None]:
    real_open, real_fdopen, real_replace, real_rename, real_mkdir = os.open, os.fdopen, os.replace, os.rename, os.mkdir

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError(kind, os.strerror(kind))

    def fake_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if kind == errno.EROFS and flags & os.O_CREAT:
            raise OSError(kind, os.strerror(kind), str(path))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    def fake_fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_fdopen(fd, mode, *args, **kwargs)
        return _Full(handle) if kind == errno.ENOSPC and ("w" in mode or "a" in mode) else handle

    def fake_mkdir(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        if kind == errno.EROFS and not os.path.lexists(path):
            raise OSError(kind, os.strerror(kind), str(path))
        real_mkdir(path, mode, dir_fd=dir_fd)

    os.open, os.fdopen, os.mkdir = fake_open, fake_fdopen, fake_mkdir  # type: ignore[assignment]
    os.replace = os.rename = refused  # type: ignore[assignment]
    try:
        yield
    finally:
        os.open, os.fdopen, os.replace, os.rename = real_open, real_fdopen, real_replace, real_rename  # type: ignore[assignment]
        os.mkdir = real_mkdir


def _tree(tmp_path: Path) -> Path:
    shutil.copyfile(FIXTURE, tmp_path / "m.py")
    return tmp_path / "m.py"


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _run(root: Path, kind: int, args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(root)
    with fault(kind):
        result = CliRunner().invoke(main, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


KINDS = [pytest.param(errno.ENOSPC, id="ENOSPC"), pytest.param(errno.EROFS, id="EROFS")]
WRITERS = [
    pytest.param(["fix", "--apply", "m.py"], id="fix-apply"),
    pytest.param(["check", "--fix", "--no-cache", "m.py"], id="check-fix"),
    pytest.param(["check", "--add-noqa", "--no-cache", "m.py"], id="add-noqa"),
    pytest.param(["check", "--write-baseline", "baseline.json", "--no-cache", "m.py"], id="write-baseline"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("args", WRITERS)
def test_a_failing_writer_leaves_the_original_and_says_so_in_one_line(
    tmp_path: Path, kind: int, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(tmp_path)
    (tmp_path / "baseline.json").write_text('{"old": "baseline"}\n')  # what --write-baseline would replace
    before = _snapshot(tmp_path)
    code, out = _run(tmp_path, kind, args, monkeypatch)
    assert code == 2, out
    assert _snapshot(tmp_path) == before  # the original intact, no temporary file left
    errors = [line for line in out.splitlines() if os.strerror(kind) in line]
    assert len(errors) == 1 and ("m.py" in errors[0] or "baseline.json" in errors[0]), out
    assert "Traceback" not in out
    # the same command without the fault writes: the test saw a real write fail
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, args).exit_code in (0, 1)
    assert _snapshot(tmp_path) != before


@pytest.mark.parametrize("kind", KINDS)
def test_a_cache_that_cannot_be_written_is_one_warning(tmp_path: Path, kind: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["check", "m.py"]).exit_code == 1  # a cache to keep
    (tmp_path / "n.py").write_bytes(FIXTURE.read_bytes() + b"\n# another\n")  # a result to add
    before = _snapshot(tmp_path / ".offlint_cache")
    code, out = _run(tmp_path, kind, ["check", "m.py", "n.py"], monkeypatch)
    assert code == 1, out  # the findings' exit code: the results are right
    warnings = [line for line in out.splitlines() if line.startswith("offlint: warning:")]
    assert len(warnings) == 1 and "cache" in warnings[0] and os.strerror(kind) in warnings[0], out
    assert _snapshot(tmp_path / ".offlint_cache") == before
    assert "Found 2 errors" in out


def test_a_cache_folder_that_cannot_be_created_is_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    code, out = _run(tmp_path, errno.EROFS, ["check", "m.py"], monkeypatch)
    assert code == 1, out
    assert [line for line in out.splitlines() if line.startswith("offlint: warning:")] == [
        f"offlint: warning: cache not written: {os.strerror(errno.EROFS)}"
    ]
    assert not (tmp_path / ".offlint_cache").exists()


def test_a_cache_of_another_version_is_ignored_and_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    first = CliRunner().invoke(main, ["check", "--output-format", "json", "m.py"])
    (cache,) = (tmp_path / ".offlint_cache").glob("results-*.json")
    stored = json.loads(cache.read_text())
    # another offlint wrote this file: its engine key differs, and its entries claim no finding
    stored["engine"] = "0" * 64
    for entry in stored["entries"].values():
        entry.clear()
        entry["p"] = 1
    cache.write_text(json.dumps(stored))
    other = tmp_path / ".offlint_cache" / "results-0123456789abcdef01234567.json"  # another version's own file
    other.write_text(json.dumps(stored))
    second = CliRunner().invoke(main, ["check", "--output-format", "json", "m.py"])
    assert second.exit_code == 1 and json.loads(second.stdout) == json.loads(first.stdout)
    rebuilt = json.loads(cache.read_text())
    assert rebuilt["engine"] != "0" * 64 and rebuilt["entries"]
    assert other.exists()  # another version's file is left to it (it may be running right now)
