"""Feedback during a long `check` on stderr: files done out of the total and the current phase.

On a terminal it is a transient rich progress bar that appears only once the run has taken about
a second (a warm run never shows it) and is erased when the run ends; `--progress` asks for it
anywhere (a CI log gets plain lines instead, one per phase and every tenth of the files);
`--no-progress`, `-q` and `-s` turn it off. It writes to stderr only: stdout holds the report.
"""

from __future__ import annotations

import time
from typing import IO, Any

# how long a run goes before a terminal shows progress (a warm run ends well before)
SHOW_AFTER_S = 1.0


class ProgressDisplay:
    """The callback the pipeline reports to: `display(phase, done, total)`."""

    def __init__(self, stream: IO[str], *, live: bool, delay: float = SHOW_AFTER_S) -> None:
        self.stream = stream
        self.live = live
        self.delay = delay
        self.started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        self._last: tuple[str, int] | None = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        if time.monotonic() - self.started < self.delay:
            return
        if self.live:
            self._live(phase, done, total)
        else:
            self._plain(phase, done, total)

    def _live(self, phase: str, done: int, total: int) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(
                TextColumn("offlint: {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("files"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(phase, total=total)
        self._bar.update(self._task, description=phase, completed=done, total=total)

    def _plain(self, phase: str, done: int, total: int) -> None:
        step = max(total // 10, 1)
        last = self._last
        if last is not None and last[0] == phase and done != total and done - last[1] < step:
            return
        if last == (phase, done):
            return
        self._last = (phase, done)
        self.stream.write(f"offlint: {phase}: {done}/{total} files\n")
        self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
