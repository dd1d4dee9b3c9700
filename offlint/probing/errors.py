"""The one error type that ends a probe before any scenario runs."""

from __future__ import annotations


class ProbeUsageError(Exception):
    """No usable GPU, a bad TARGET or bad options: exit code 2 with this one-line message."""

    exit_code = 2
