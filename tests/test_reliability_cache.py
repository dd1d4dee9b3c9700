"""The cache never follows a planted link, never reads anything but this user's regular files,
and never deletes anything it did not name (issue 15, item 5)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from offlint.analysis.cache import ResultCache
from offlint.diagnostics import FileReport

ROOT_ONLY = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
OFFLOADER = (
    "import torch\n\n\nclass Offloader(torch.nn.Module):\n    def __init__(self):\n"
    "        self.alt_stream = torch.cuda.Stream()\n\n    def forward(self):\n"
    "        self.alt_stream.synchronize()\n        return 1\n"
)


def _results_name() -> str:
    return ResultCache(Path("/nonexistent-offlint-cache")).path.name


def _cache_with_an_entry(folder: Path) -> ResultCache:
    results = ResultCache(folder)
    results.put("key", FileReport(path="x.py"))
    return results


def _old(path: Path) -> None:
    two_days_ago = time.time() - 2 * 86400
    os.utime(path, (two_days_ago, two_days_ago), follow_symlinks=False)


def _check(project: Path, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    (project / "m.py").write_text(OFFLOADER)
    return subprocess.run(
        [sys.executable, "-m", "offlint", "check", "m.py"],
        cwd=project,
        capture_output=True,
        timeout=timeout,
        preexec_fn=_bounded_memory,  # a regression reading /dev/zero must not take the machine down
    )


def _bounded_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def test_a_symlinked_cache_folder_is_not_used(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    old = victim / "results-0123456789abcdef01234567.json"  # the name offlint gives its own
    old.write_text("someone's data")
    _old(old)
    project = tmp_path / "project"
    project.mkdir()
    (project / ".offlint_cache").symlink_to(victim)
    done = _check(project)
    assert done.returncode == 1, done.stderr  # the run goes on, uncached
    assert sorted(p.name for p in victim.iterdir()) == [old.name]  # nothing written, nothing deleted
    assert old.read_text() == "someone's data"
    assert not _cache_with_an_entry(project / ".offlint_cache").save()


def test_dangling_marker_links_create_nothing(tmp_path: Path) -> None:
    folder = tmp_path / ".offlint_cache"
    folder.mkdir()
    (folder / ".gitignore").symlink_to(tmp_path / "planted-gitignore")
    (folder / "CACHEDIR.TAG").symlink_to(tmp_path / "planted-tag")
    (folder / _results_name()).symlink_to(tmp_path / "planted-results")
    assert _cache_with_an_entry(folder).save()
    assert not (tmp_path / "planted-gitignore").exists()
    assert not (tmp_path / "planted-tag").exists()
    assert not (tmp_path / "planted-results").exists()
    assert not (folder / _results_name()).is_symlink()  # the link was replaced, not followed
    assert ResultCache(folder).get("key", "x.py") is not None


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "link-to-own-file"])
def test_only_regular_files_are_read(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / ".offlint_cache"
    folder.mkdir()
    target = folder / _results_name()
    if kind == "fifo":
        os.mkfifo(target)  # opening it for reading used to wait forever for a writer
    elif kind == "dev-zero":
        target.symlink_to("/dev/zero")  # read until the OOM killer
    else:
        elsewhere = tmp_path / "elsewhere.json"
        _cache_with_an_entry(tmp_path / "other").save()
        elsewhere.write_bytes((tmp_path / "other" / _results_name()).read_bytes())
        target.symlink_to(elsewhere)
    before = elsewhere.read_bytes() if kind == "link-to-own-file" else b""
    done = _check(tmp_path, timeout=60)
    assert done.returncode == 1, done.stderr
    if kind == "link-to-own-file":  # not written through: replaced by a file of its own
        assert elsewhere.read_bytes() == before
        # (by name only when the run's engine key is the test's: it hashes offlint's source times)
        saved = [p for p in folder.glob("results-*.json") if p.is_file() and not p.is_symlink()]
        assert saved, sorted(p.name for p in folder.iterdir())


def test_only_its_own_stale_files_are_deleted(tmp_path: Path) -> None:
    folder = tmp_path / ".offlint_cache"
    folder.mkdir()
    ours = folder / "results-0123456789abcdef01234567.json"
    not_ours = folder / "results-notours.json"
    a_folder = folder / "results-fedcba9876543210fedcba98.json"
    stale_temp = folder / ".results-abc123.tmp"
    for path in (ours, not_ours, stale_temp):
        path.write_text("{}")
    a_folder.mkdir()
    for path in (ours, not_ours, stale_temp, a_folder):
        _old(path)
    assert _cache_with_an_entry(folder).save()
    left = sorted(p.name for p in folder.iterdir())
    assert ours.name not in left and stale_temp.name not in left  # its own old files go
    assert not_ours.name in left and a_folder.name in left


@ROOT_ONLY
def test_another_users_files_and_folders_are_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / ".offlint_cache"
    folder.mkdir()
    theirs = folder / "results-0123456789abcdef01234567.json"
    theirs.write_text("{}")
    os.chown(theirs, 4321, 4321)
    _old(theirs)
    assert _cache_with_an_entry(folder).save()
    assert theirs.exists()

    their_folder = tmp_path / "theirs" / ".offlint_cache"
    their_folder.mkdir(parents=True)
    os.chown(their_folder, 4321, 4321)
    assert not _cache_with_an_entry(their_folder).save()
    assert list(their_folder.iterdir()) == []
