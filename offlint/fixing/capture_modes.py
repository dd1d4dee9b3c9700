"""Capture modes are part of a fix's contract (issue 33).

`[tool.offlint] capture-modes = [...]` names how the user's engine may capture the forward:

- `whole`: one `torch.cuda.graph` of the forward (CUDA graphs of a decode step);
- `piecewise`: one graph per piece, split at points the engine chooses (vLLM's and SGLang's
  piecewise capture split at every attention op), nothing between the pieces joined by the engine;
- `segmented-sglang`: SGLang's breakable capture: segments with eager breaks between them, the
  `wait_stream` forks made in a segment joined at its end (event forks are not);
- `segmented-vllm`: vLLM's breakable capture: the same, joining nothing at a segment's end.

Default: all four. A fix is offered only where it is sound under every named mode; otherwise the
finding says "not fixed: <reason>" naming the mode that defeats it and what the user can do.

What decides soundness is where a fix forks a side stream and where it joins it. Every fork must
be joined before its own graph's capture ends (904 cudaErrorStreamCaptureUnjoined otherwise), and
a piece may end between any two layers (and inside one, at its attention): a fix whose fork is
joined in a later call (a later layer, the next module's hook, the end of the forward) is sound
only when the whole forward is one graph. Measured on an H100 with SGLang 0.5.23's offloader
(docs/fix.md, benchmarks/results/fix-sglang-release-modes-h100-2026-12-07.json): the primed
overlap rewrite captures whole forwards exactly and fails piecewise capture with 904 in the first
piece, where the released class captures.
"""

from __future__ import annotations

WHOLE = "whole"
PIECEWISE = "piecewise"
SEGMENTED_SGLANG = "segmented-sglang"
SEGMENTED_VLLM = "segmented-vllm"
CAPTURE_MODES = (WHOLE, PIECEWISE, SEGMENTED_SGLANG, SEGMENTED_VLLM)

# the probe's name of each mode (`offlint probe --capture-mode`)
PROBE_MODE = {WHOLE: "whole", PIECEWISE: "pieces", SEGMENTED_SGLANG: "segmented-sglang", SEGMENTED_VLLM: "segmented-vllm"}

_CROSS_CALL_FORK = (
    "it forks each copy in one call and joins it in a later one ({where}); under {mode} capture a "
    "graph may end between the two, and a fork still open when its graph's capture ends fails it "
    "(904 cudaErrorStreamCaptureUnjoined; measured on SGLang 0.5.23's offloader, docs/fix.md)"
)
_SGLANG_SEGMENT = (
    "SGLang's segment end joins the copy's fork, but the wait in the next segment is then on an "
    "event recorded in an ended capture (CUDA error 1, invalid argument; measured, "
    "docs/probe-capture-modes.md)"
)

# why a fix (by its fixer's label) is unsound under a mode; a label absent here, or a mode absent
# from its entry, is sound there: it forks nothing inside a capture (OFL204, OFL106, hook moves,
# the inline rewrite), or joins every fork in the call and block that made it (fork-join)
_UNSOUND: dict[str, dict[str, str]] = {
    "offloader-overlap": {
        PIECEWISE: _CROSS_CALL_FORK.format(where="a layer's hook prefetches a later layer", mode="piecewise"),
        SEGMENTED_VLLM: _CROSS_CALL_FORK.format(
            where="a layer's hook prefetches a later layer", mode="segmented (vLLM)"
        ),
        SEGMENTED_SGLANG: _SGLANG_SEGMENT,
    },
    "event-handoff": {
        PIECEWISE: _CROSS_CALL_FORK.format(where="the producer records, a later consumer waits", mode="piecewise"),
        SEGMENTED_VLLM: _CROSS_CALL_FORK.format(
            where="the producer records, a later consumer waits", mode="segmented (vLLM)"
        ),
        SEGMENTED_SGLANG: _SGLANG_SEGMENT,
    },
    "external-event": {
        PIECEWISE: _CROSS_CALL_FORK.format(
            where="an external event orders the graphs but joins no fork", mode="piecewise"
        ),
        SEGMENTED_VLLM: _CROSS_CALL_FORK.format(
            where="an external event orders the graphs but joins no fork", mode="segmented (vLLM)"
        ),
        # SGLang's segment end joins a `wait_stream` fork but not an event fork, and which one the
        # producer makes is not what this fix looks at; not measured: refused
        SEGMENTED_SGLANG: _CROSS_CALL_FORK.format(
            where="an external event orders the graphs but joins no fork; SGLang's segment end joins "
            "only `wait_stream` forks",
            mode="segmented (SGLang)",
        ),
    },
}

_WHAT_TO_DO = (
    "if your engine captures whole forwards only, say so with `[tool.offlint] capture-modes = "
    '["whole"]`; otherwise join each copy in the call that issues it (or use `--strategy inline`, '
    "which forks nothing while capturing)"
)


def parse_modes(value: object) -> tuple[str, ...]:
    """The configured modes, validated (ValueError with the one-line reason)."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"capture-modes must be a non-empty list of: {', '.join(CAPTURE_MODES)}")
    unknown = [v for v in value if v not in CAPTURE_MODES]
    if unknown:
        raise ValueError(f"capture-modes: unknown mode {unknown[0]!r} (one of {', '.join(CAPTURE_MODES)})")
    return tuple(m for m in CAPTURE_MODES if m in value)


def defeating(label: str, modes: tuple[str, ...]) -> tuple[str, str] | None:
    """(mode, why) of the first named mode under which the fix labelled `label` is unsound."""
    # a pair's joint fix ("external-event+fork-join") is unsound where any of its parts is
    for part in label.split("+"):
        unsound = _UNSOUND.get(part, {})
        for mode in modes:
            if mode in unsound:
                return mode, unsound[mode]
    return None


def not_sound_reason(label: str, modes: tuple[str, ...]) -> str | None:
    """The "not fixed" reason for a fix unsound under a named mode, or None."""
    found = defeating(label, modes)
    if found is None:
        return None
    mode, why = found
    return f"the {label} fix is not sound under capture mode `{mode}`: {why}; {_WHAT_TO_DO}"


def overlap_sound(modes: tuple[str, ...]) -> bool:
    return defeating("offloader-overlap", modes) is None
