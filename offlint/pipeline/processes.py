"""Process hygiene for runs with worker processes: no worker outlives its run.

- The run's SIGINT, SIGTERM and SIGHUP end the workers first (SIGKILL: they hold nothing to
  save, and a worker busy in libcst's native parser would not see a gentler signal for seconds),
  then the run, at once, with 128 + the signal's number (130 for Ctrl-C, as shells report it).
  Waiting for the pool to wind down took 39 s, and a caller reading our stdout blocked on the
  workers that still held it.
- A worker is killed when its parent dies by any means, SIGKILL included: Linux's
  `PR_SET_PDEATHSIG`, set through ctypes in the worker's initializer; elsewhere a thread in the
  worker watches for its parent pid to change.
- Workers ignore SIGINT: Ctrl-C reaches the whole foreground process group, and the parent alone
  decides (a worker's KeyboardInterrupt would only print a traceback).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_ENDING = (signal.SIGINT, signal.SIGTERM, *((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()))
PR_SET_PDEATHSIG = 1


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, not the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        with contextlib.suppress(OSError):
            return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _end_run(signum: int, _frame: FrameType | None) -> None:
    import multiprocessing

    for child in multiprocessing.active_children():
        with contextlib.suppress(OSError):
            if child.pid is not None:
                os.kill(child.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        name = signal.Signals(signum).name
        os.write(2, f"offlint: interrupted by {name}\n".encode())
    os._exit(128 + signum)


@contextlib.contextmanager
def ending_with_the_run() -> Iterator[None]:
    """While the block runs, a SIGINT, SIGTERM or SIGHUP ends the workers and then the process
    (exit 128 + signal). Only the main thread can set handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in _ENDING}
    for sig in _ENDING:
        if previous[sig] is signal.SIG_IGN and sig != signal.SIGINT:
            continue  # nohup: an ignored SIGHUP stays ignored
        signal.signal(sig, _end_run)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def ends_with_the_run(function: Callable[P, R]) -> Callable[P, R]:
    """`function` run inside `ending_with_the_run()`: a command without workers (`fix`) also
    exits 130 on Ctrl-C at once, not with a KeyboardInterrupt its file loop may swallow."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with ending_with_the_run():
            return function(*args, **kwargs)

    return run


def watch_parent() -> None:
    """In a worker: die with the parent. Called first in the pool's initializer."""
    parent = os.getppid()
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in _ENDING[1:]:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_DFL)  # not the parent's handler, inherited by fork
    if sys.platform.startswith("linux") and _pdeathsig(signal.SIGKILL):
        if os.getppid() != parent:  # the parent died before the watch was set
            os._exit(1)
        return
    threading.Thread(target=_poll_parent, args=(parent,), name="offlint-parent-watch", daemon=True).start()


def _pdeathsig(sig: int) -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _poll_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)
