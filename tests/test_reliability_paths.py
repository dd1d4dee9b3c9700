"""One guarded path for every file offlint reads or writes (issue 27, item 1): regular files only
(a FIFO or a device is one line, never a hang or a MemoryError), a size cap, links refused
outside the tree for every writer, permission errors one line per path, and a baseline written
atomically whatever the file names hold."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from offlint.guarded_io import Refused, TooLarge, read_regular, write_new_file

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "golden" / "record_stream" / "in.py"


def _offlint(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A real process: a hang shows as TimeoutExpired, a traceback in stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "offlint", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
    )


def _one_line_error(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert [line for line in result.stderr.splitlines() if needle in line], result.stderr


def test_a_fifo_or_a_device_is_refused_by_type_without_reading(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(Refused, match="is a FIFO, not a regular file"):
        read_regular(tmp_path / "pipe")  # would block for ever on a plain open()
    with pytest.raises(Refused, match="is a device"):
        read_regular("/dev/zero")  # would read until MemoryError
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(TooLarge, match="101 bytes, over the limit of 100"):
        read_regular(tmp_path / "big", limit=100)
    assert read_regular(tmp_path / "big", limit=101)[0] == b"x" * 101


@pytest.mark.parametrize("option", ["--config", "--baseline"])
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_config_and_baseline_that_are_not_regular_files_are_one_line(tmp_path: Path, option: str, kind: str) -> None:
    shutil.copyfile(FIXTURE, tmp_path / "m.py")
    special = tmp_path / "special.toml"
    if kind == "fifo":
        os.mkfifo(special)
    else:
        special.symlink_to("/dev/zero")
    result = _offlint(tmp_path, "check", "--no-cache", option, "special.toml", "m.py", timeout=30)
    assert result.returncode == 2
    _one_line_error(result, "not a regular file")


@pytest.mark.parametrize("where", [".gitignore", ".git/info/exclude"])
def test_an_ignore_file_that_is_a_fifo_is_reported_not_waited_on(tmp_path: Path, where: str) -> None:
    (tmp_path / ".git" / "info").mkdir(parents=True)
    shutil.copyfile(FIXTURE, tmp_path / "m.py")
    os.mkfifo(tmp_path / where)
    result = _offlint(tmp_path, "check", "--no-cache", ".", timeout=30)
    assert result.returncode == 2
    _one_line_error(result, f"{where}: unreadable: ignore file is a FIFO, not a regular file")
    assert "OFL204" in result.stdout  # the run went on


def test_add_noqa_does_not_write_through_a_link_leading_outside_the_tree(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "outside").mkdir()
    victim = tmp_path / "outside" / "victim.py"
    shutil.copyfile(FIXTURE, victim)
    (tmp_path / "tree" / "link.py").symlink_to("../outside/victim.py")
    shutil.copyfile(FIXTURE, tmp_path / "tree" / "own.py")
    result = _offlint(tmp_path / "tree", "check", "--no-cache", "--add-noqa", ".")
    assert result.returncode == 2
    _one_line_error(result, "link.py: write-failed: is a link to")
    assert victim.read_bytes() == FIXTURE.read_bytes()
    assert "offlint: ignore" in (tmp_path / "tree" / "own.py").read_text()  # the rest is edited


def test_write_baseline_with_a_non_utf8_file_name(tmp_path: Path) -> None:
    name = os.fsdecode(b"caf\xff.py")
    shutil.copyfile(FIXTURE, tmp_path / name)
    result = _offlint(tmp_path, "check", "--no-cache", "--write-baseline", "base.json", ".")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    document = json.loads((tmp_path / "base.json").read_text(encoding="utf-8"))
    assert [f["path"] for f in document["findings"]] == ["caf\\xff.py"]
    # and the baseline it wrote matches the same file on the next run
    again = _offlint(tmp_path, "check", "--no-cache", "--baseline", "base.json", ".")
    assert again.returncode == 0, again.stdout + again.stderr


def test_write_baseline_through_a_link_outside_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text("keep")
    (tmp_path / "tree" / "base.json").symlink_to(outside)
    shutil.copyfile(FIXTURE, tmp_path / "tree" / "m.py")
    result = _offlint(tmp_path / "tree", "check", "--no-cache", "--write-baseline", "base.json", ".")
    assert result.returncode == 2
    _one_line_error(result, "outside the checked tree")
    assert outside.read_text() == "keep"
    assert sorted(p.name for p in (tmp_path / "tree").iterdir()) == ["base.json", "m.py"]


def test_an_atomic_write_that_fails_leaves_no_file(tmp_path: Path) -> None:
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(Refused, match="a directory; not written"):
        write_new_file(tmp_path / "dir.json", b"{}")
    write_new_file(tmp_path / "new.json", b"{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.json", "new.json"]


SETPRIV = shutil.which("setpriv")
NOT_ROOT_TEST = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or SETPRIV is None,
    reason="needs root and setpriv to run offlint as an unprivileged user",
)


def _others_can_reach(path: Path) -> bool:
    """Every folder above `path` lets other users through (o+x): the unprivileged run imports
    offlint from the checkout (one under a 0700 temporary folder it cannot)."""
    return all(folder.stat().st_mode & 0o001 for folder in path.parents)


@NOT_ROOT_TEST
def test_a_folder_without_x_is_one_line_per_path_for_an_unprivileged_user(tmp_path: Path) -> None:
    import libcst

    site = Path(libcst.__file__).resolve().parent.parent
    if not _others_can_reach(ROOT / "offlint"):
        pytest.skip(f"an unprivileged user cannot reach the checkout {ROOT} (a folder above it has no o+x)")
    top = tmp_path / "t"
    (top / "noexec").mkdir(parents=True)
    shutil.copyfile(FIXTURE, top / "ok.py")
    shutil.copyfile(FIXTURE, top / "noexec" / "b.py")
    for path in [tmp_path, top, top / "ok.py", top / "noexec", top / "noexec" / "b.py"]:
        os.chown(path, 65534, 65534)
    os.chmod(tmp_path, 0o755)
    os.chmod(top / "noexec", 0o600)
    as_nobody = [SETPRIV or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": f"{ROOT}:{site}"}
    for args in (["fix", "--apply", "."], ["check", "--no-cache", "noexec/b.py"], ["check", "--no-cache", "."]):
        result = subprocess.run(
            [*as_nobody, sys.executable, "-m", "offlint", *args],
            cwd=top, env=env, capture_output=True, text=True, timeout=120,
        )
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "noexec/b.py: unreadable: Permission denied" in result.stdout + result.stderr
