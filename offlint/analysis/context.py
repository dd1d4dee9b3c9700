"""Whether a piece of code runs while a CUDA graph is being captured."""

from __future__ import annotations

import enum


class Context(enum.Enum):
    """Whether code runs while a CUDA graph is being captured."""

    CAPTURING = "capturing"  # only runs while capturing
    EAGER = "eager"  # guarded: only runs when not capturing
    UNKNOWN = "unknown"  # may run either way

    def negate(self) -> Context:
        if self is Context.CAPTURING:
            return Context.EAGER
        if self is Context.EAGER:
            return Context.CAPTURING
        return Context.UNKNOWN

    @property
    def may_capture(self) -> bool:
        return self is not Context.EAGER
