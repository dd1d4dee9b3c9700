"""Run one file's parse and analysis on a thread with a deep stack.

libcst's visitors (metadata resolution, codegen, `CSTTransformer`s) recurse once or more per
level of the tree: a legal `1 + 1 + ...` of 400 terms or a 400-link attribute chain exceeds
Python's default limit of 1 000 frames, and its native parser recurses on the C stack. A thread
whose stack is STACK_BYTES (reserved, only touched pages cost memory) lets the recursion limit
rise to RECURSION_LIMIT without risking a C stack overflow; the guard (`guard.py`) bounds the
depth that ever reaches libcst well below that, and whatever still overflows raises a
RecursionError that the caller turns into a one-line `too-deeply-nested` error.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

STACK_BYTES = 512 * 1024 * 1024
# ~10 kB of C stack per Python frame: far more than a libcst visitor level takes
RECURSION_LIMIT = 50_000

_state = threading.local()
_lock = threading.Lock()  # one piece of work at a time: the recursion limit is process-wide


class _Worker:
    """The deep-stack thread, started on first use and kept (starting a thread per file cost more
    than a small file's analysis); a forked child starts its own."""

    def __init__(self) -> None:
        self.tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        previous = threading.stack_size()
        try:
            threading.stack_size(STACK_BYTES)
            self.thread = threading.Thread(target=self._serve, name="offlint-deep-stack", daemon=True)
            self.thread.start()
        finally:
            threading.stack_size(previous)

    def _serve(self) -> None:
        _state.deep = True
        while True:
            self.tasks.get()()


_worker: _Worker | None = None


def _forget_worker() -> None:
    global _worker, _lock
    _worker = None  # a forked child has no thread of its parent's
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_worker)


def on_deep_stack(work: Callable[[], T]) -> T:
    """`work()`'s result (or exception), computed on the deep-stack thread."""
    global _worker
    if getattr(_state, "deep", False):
        return work()  # already on it
    outcome: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def task() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # handed to the caller's thread as is
            failure.append(exc)
        finally:
            done.set()

    with _lock:
        if _worker is None:
            try:
                _worker = _Worker()
            except (ValueError, RuntimeError, MemoryError):
                return work()  # no such thread here (a platform limit): the default stack
        previous_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(previous_limit, RECURSION_LIMIT))
        try:
            _worker.tasks.put(task)
            done.wait()
        finally:
            sys.setrecursionlimit(previous_limit)
    if failure:
        raise failure[0]
    return outcome[0]
