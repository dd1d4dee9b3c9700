"""Process hygiene (issue 27, item 2): the workers of `check -j N` end with the run on SIGTERM,
SIGHUP and SIGINT, die when their parent is killed, SIGINT exits 130 within a second, and `-j`
is capped at the CPUs the run may use."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from offlint.pipeline.check import worker_count
from offlint.pipeline.processes import usable_cpus

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "sglang_offloader_original.py"
LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for the process group")


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def _start(tmp_path: Path) -> subprocess.Popen[bytes]:
    for i in range(150):
        shutil.copyfile(FIXTURE, tmp_path / f"m{i}.py")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "offlint", "check", "--no-cache", "-q", "-j", "2", "."],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while len(_group(process.pid)) < 3:  # the run and its two workers
        assert process.poll() is None and time.monotonic() < deadline, "no workers started"
        time.sleep(0.05)
    time.sleep(0.3)  # let them take work
    return process


def _wait_group_gone(pgid: int, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while _group(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _group(pgid)


@LINUX
@pytest.mark.parametrize(
    ("sig", "to_group", "code"),
    [
        (signal.SIGINT, True, 130),  # Ctrl-C: the whole foreground group
        (signal.SIGINT, False, 130),  # the main process alone
        (signal.SIGTERM, False, 128 + signal.SIGTERM),
        (signal.SIGHUP, False, 128 + signal.SIGHUP),
    ],
)
def test_a_signal_ends_the_run_and_its_workers_within_a_second(
    tmp_path: Path, sig: signal.Signals, to_group: bool, code: int
) -> None:
    process = _start(tmp_path)
    sent = time.monotonic()
    if to_group:
        os.killpg(process.pid, sig)
    else:
        os.kill(process.pid, sig)
    try:
        returncode = process.wait(timeout=10)
    finally:
        left = _wait_group_gone(process.pid, 2)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert returncode == code
    assert time.monotonic() - sent < 1.5
    assert left == []
    assert process.stderr is not None
    stderr = process.stderr.read().decode()
    assert "Traceback" not in stderr and f"interrupted by {sig.name}" in stderr


@LINUX
def test_workers_die_when_the_parent_is_killed(tmp_path: Path) -> None:
    process = _start(tmp_path)
    process.kill()  # SIGKILL: no handler runs, only the workers' parent-death watch
    process.wait(timeout=10)
    left = _wait_group_gone(process.pid, 3)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


def test_jobs_is_capped_at_the_usable_cpus() -> None:
    cpus = usable_cpus()
    assert worker_count(cpus * 8, 1000) == cpus
    assert worker_count(None, 1000) == cpus
    assert worker_count(1, 1000) == 1
    assert worker_count(cpus * 8, 1) == 1


def test_sigint_ends_fix_at_once_with_130(tmp_path: Path) -> None:
    """`fix` has no workers, but a Ctrl-C during its analysis used to be swallowed by the file
    loop (the run went on and exited as if uninterrupted); it ends the run at once as `check`."""
    from benchmarks.scaling import many_methods

    (tmp_path / "m.py").write_text(many_methods(800))  # about 10 s of fix planning
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OFFLINT_MAX_FIX_CHARS": "10000000"}
    process = subprocess.Popen(
        [sys.executable, "-m", "offlint", "fix", "--min-confidence", "low", "m.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    time.sleep(2.5)  # into the analysis
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert time.monotonic() - started < 1.5
    assert b"interrupted by SIGINT" in stderr and b"Traceback" not in stderr
