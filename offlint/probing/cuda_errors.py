"""CUDA errors out of PyTorch exceptions: walk the chain to the root, name it, find the line.

PyTorch usually surfaces 901 cudaErrorStreamCaptureInvalidated at the end of a failed capture;
the error that caused it (905, 900, ...) is the exception that was propagating when the capture
ended, reachable through `__context__` / `__cause__`. What the user needs is the root and the
line of *their* code that raised it.
"""

from __future__ import annotations

import linecache
import os
import re
import traceback
from dataclasses import asdict, dataclass
from typing import Any

from offlint.probing.errors import is_user_file

# Numbers and names from cudaError_t (CUDA runtime API, driver_types.h), with the text
# cudaGetErrorString gives, which is what PyTorch puts into its messages.
CUDA_ERRORS: dict[int, tuple[str, str]] = {
    1: ("cudaErrorInvalidValue", "invalid argument"),
    2: ("cudaErrorMemoryAllocation", "out of memory"),
    3: ("cudaErrorInitializationError", "initialization error"),
    100: ("cudaErrorNoDevice", "no CUDA-capable device is detected"),
    101: ("cudaErrorInvalidDevice", "invalid device ordinal"),
    400: ("cudaErrorInvalidResourceHandle", "invalid resource handle"),
    600: ("cudaErrorNotReady", "device not ready"),
    700: ("cudaErrorIllegalAddress", "an illegal memory access was encountered"),
    719: ("cudaErrorLaunchFailure", "unspecified launch failure"),
    900: ("cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"),
    901: (
        "cudaErrorStreamCaptureInvalidated",
        "operation failed due to a previous error during capture",
    ),
    902: (
        "cudaErrorStreamCaptureMerge",
        "operation would result in a merge of separate capture sequences",
    ),
    903: (
        "cudaErrorStreamCaptureUnmatched",
        "capture was not ended in the same stream as it began",
    ),
    904: ("cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"),
    905: (
        "cudaErrorStreamCaptureIsolation",
        "dependency created on uncaptured work in another stream",
    ),
    906: (
        "cudaErrorStreamCaptureImplicit",
        "operation would make the legacy stream depend on a capturing blocking stream",
    ),
    907: (
        "cudaErrorCapturedEvent",
        "operation not permitted on an event last recorded in a capturing stream",
    ),
    908: (
        "cudaErrorStreamCaptureWrongThread",
        "attempt to terminate a thread-local capture sequence from another thread",
    ),
    909: ("cudaErrorTimeout", "wait operation timed out"),
    910: (
        "cudaErrorGraphExecUpdateFailure",
        "the graph update was not performed because it included changes which violated "
        "constraints specific to instantiated graph update",
    ),
}
CUDA_ERROR_NUMBERS: dict[str, int] = {name: number for number, (name, _) in CUDA_ERRORS.items()}

# "Search for `cudaErrorStreamCaptureIsolation' in https://docs.nvidia.com/..." (recent PyTorch)
_NAME_PATTERN = re.compile(r"\bcudaError[A-Za-z]+\b")
_MESSAGE_PATTERN = re.compile(r"CUDA error: ([^\n]+)")


def cuda_error_name(number: int) -> str | None:
    entry = CUDA_ERRORS.get(number)
    return entry[0] if entry else None


def cuda_error_number(name: str) -> int | None:
    return CUDA_ERROR_NUMBERS.get(name)


def identify_cuda_error(message: str) -> tuple[int | None, str | None]:
    """(number, name) of the CUDA error a PyTorch message describes, or (None, None)."""
    for name in _NAME_PATTERN.findall(message):
        if name in CUDA_ERROR_NUMBERS:
            return CUDA_ERROR_NUMBERS[name], name
    match = _MESSAGE_PATTERN.search(message)
    if match:
        text = match.group(1).strip().rstrip(".")
        for number, (name, description) in CUDA_ERRORS.items():
            if text == description:
                return number, name
    return None, None


def exception_chain(exc: BaseException) -> list[BaseException]:
    """`exc` first, then what caused it, down to the root (cycles cut)."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        chain.append(current)
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return chain


@dataclass(frozen=True)
class SourceLine:
    file: str
    line: int
    function: str
    code: str


@dataclass(frozen=True)
class ChainLink:
    type: str
    message: str
    cuda_code: int | None
    cuda_name: str | None


def _first_line(message: str) -> str:
    for line in message.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def triggering_line(exc: BaseException, target_files: list[str]) -> SourceLine | None:
    """The innermost frame of `exc`'s traceback that lies in one of `target_files` (the user's
    offloader), else the innermost frame outside torch and offlint.probing."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if any(_same_file(frame.filename, path) for path in target_files):
            return _source_line(frame)
    for frame in reversed(frames):
        if is_user_file(frame.filename):
            return _source_line(frame)
    return None


def _source_line(frame: traceback.FrameSummary) -> SourceLine:
    code = frame.line or linecache.getline(frame.filename, frame.lineno or 0).strip()
    return SourceLine(frame.filename, frame.lineno or 0, frame.name, code)


def describe_exception(exc: BaseException, target_files: list[str]) -> dict[str, Any]:
    """JSON-ready account of a failure: the chain (surface first), the root CUDA error (the
    deepest link that names one; the deepest link when none does) and the line that raised it."""
    chain = exception_chain(exc)
    links = []
    for link in chain:
        message = str(link)
        code, name = identify_cuda_error(message)
        links.append(ChainLink(type(link).__name__, _first_line(message), code, name))
    root_index = len(chain) - 1
    for index in range(len(chain) - 1, -1, -1):
        if links[index].cuda_code is not None:
            root_index = index
            break
    source = triggering_line(chain[root_index], target_files)
    return {
        "chain": [asdict(link) for link in links],
        "root": asdict(links[root_index]),
        "source": asdict(source) if source else None,
    }
