"""`fix --apply` writes stay inside the tree, keep owner, mode and other people's edits, and the
temporary files of killed runs are cleaned up (issue 15, items 5 and 6)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.fixing import writes
from offlint.fixing.writes import remove_stale_temps, write_if_unchanged

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sglang_offloader_original.py"
ROOT_ONLY = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")


def _fix_apply(cwd: Path, *paths: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["fix", "--apply", "--exit-zero", *paths], catch_exceptions=False)
    return result.exit_code, result.output


def test_a_link_to_a_file_outside_the_tree_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside" / "victim.py"
    outside.parent.mkdir()
    shutil.copyfile(FIXTURE, outside)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "link.py").symlink_to(outside)
    shutil.copyfile(FIXTURE, tree / "own.py")
    not_ours_to_clean = outside.parent / ".victim.py.999999999-0123456789ab.offlint-tmp"
    not_ours_to_clean.write_text("x")
    code, out = _fix_apply(tree, ".", monkeypatch=monkeypatch)
    assert code == 2, out
    assert outside.read_bytes() == FIXTURE.read_bytes()
    assert not_ours_to_clean.exists()  # temporary files are cleaned inside the tree only
    assert [line for line in out.splitlines() if "link.py" in line] == [
        f"offlint: error: link.py: write-failed: is a link to {outside}, outside the checked tree; not written"
    ]
    assert (tree / "own.py").read_bytes() != FIXTURE.read_bytes()  # the rest is still fixed


def test_a_link_inside_the_tree_is_written_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pkg").mkdir()
    real = tmp_path / "pkg" / "real.py"
    shutil.copyfile(FIXTURE, real)
    (tmp_path / "alias.py").symlink_to(real)
    code, out = _fix_apply(tmp_path, "alias.py", "pkg", monkeypatch=monkeypatch)
    assert code == 0, out
    assert (tmp_path / "alias.py").is_symlink()
    assert real.read_bytes() != FIXTURE.read_bytes()


def test_a_file_named_on_the_command_line_may_be_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere.py"
    shutil.copyfile(FIXTURE, elsewhere)
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "named.py").symlink_to(elsewhere)
    code, out = _fix_apply(tmp_path / "tree", "named.py", monkeypatch=monkeypatch)
    assert code == 0, out  # named explicitly: what it points to is what was asked for
    assert elsewhere.read_bytes() != FIXTURE.read_bytes()


def test_hard_links_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.py"
    shutil.copyfile(FIXTURE, target)
    os.link(target, tmp_path / "b.txt")
    code, out = _fix_apply(tmp_path, "a.py", monkeypatch=monkeypatch)
    assert code == 2, out
    assert "a.py: write-failed: has 2 hard links; not written (replacing it would split them)" in out
    assert target.read_bytes() == FIXTURE.read_bytes()
    assert os.stat(target).st_ino == os.stat(tmp_path / "b.txt").st_ino


@ROOT_ONLY
def test_owner_group_and_mode_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.py"
    shutil.copyfile(FIXTURE, target)
    os.chown(target, 4321, 4322)
    os.chmod(target, 0o664)
    code, out = _fix_apply(tmp_path, "a.py", monkeypatch=monkeypatch)
    assert code == 0, out
    info = target.stat()
    assert target.read_bytes() != FIXTURE.read_bytes()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o664)


def test_an_edit_landing_just_before_the_rename_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.py"
    shutil.copyfile(FIXTURE, target)
    original = target.read_bytes()
    editor = original + b"# saved by an editor while offlint was writing\n"
    real_fsync = os.fsync

    def save_meanwhile(fd: int) -> None:  # after offlint's last read, before its rename
        real_fsync(fd)
        target.write_bytes(editor)

    monkeypatch.setattr(writes.os, "fsync", save_meanwhile)
    error = write_if_unchanged(target, "a.py", original, b"fixed\n")
    assert error is not None and error.one_line() == "a.py: changed-on-disk: changed on disk while being written; not written"
    assert target.read_bytes() == editor
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]  # its temporary file is gone


def test_temporary_files_are_exclusive_and_named_for_cleanup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.py"
    target.write_bytes(b"x = 1\n")
    seen: list[str] = []
    real_replace = os.replace

    def record(source: str, destination: object) -> None:
        seen.append(os.path.basename(source))
        real_replace(source, destination)  # type: ignore[arg-type]

    monkeypatch.setattr(writes.os, "replace", record)
    assert write_if_unchanged(target, "a.py", b"x = 1\n", b"x = 2\n") is None
    assert target.read_bytes() == b"x = 2\n"
    assert len(seen) == 1 and writes._TEMP_NAME.match(seen[0]), seen
    assert f".{os.getpid()}-" in seen[0]


def test_stale_temporary_files_of_killed_runs_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copyfile(FIXTURE, tmp_path / "a.py")
    dead = tmp_path / ".a.py.999999999-0123456789ab.offlint-tmp"  # no such process
    alive = tmp_path / f".a.py.{os.getppid()}-0123456789ab.offlint-tmp"  # a live process's
    similar = tmp_path / ".a.py.tmp"  # not our name
    link = tmp_path / ".b.py.999999999-0123456789ab.offlint-tmp"  # our name, but a link
    (tmp_path / "keep").write_text("x")
    for path in (dead, alive, similar):
        path.write_text("half")
    link.symlink_to(tmp_path / "keep")
    code, out = _fix_apply(tmp_path, ".", monkeypatch=monkeypatch)
    assert code == 0, out
    left = sorted(p.name for p in tmp_path.iterdir())
    assert dead.name not in left
    assert alive.name in left and similar.name in left and link.name in left
    assert (tmp_path / "keep").read_text() == "x"
    assert remove_stale_temps([tmp_path]) == 0
