"""The worker's protocol channel to its parent: the real stdout, kept when the worker sends the
user's own prints to stderr. Its own module so that the scenario can announce phases without
importing the worker that runs it."""

from __future__ import annotations

import os
from typing import IO

_channel: IO[str] | None = None


def open_channel() -> IO[str]:
    """Keep the process's stdout as the channel (call before stdout is redirected)."""
    global _channel
    _channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    return _channel


def send(line: str) -> None:
    if _channel is not None:
        _channel.write(f"{line}\n")
        _channel.flush()


def announce_phase(phase: str) -> None:
    """Tell the parent which phase of a scenario runs (`offlint-phase NAME`)."""
    send(f"offlint-phase {phase}")
