"""`--compile-safe`: fixes that put no capture test on a path torch.compile traces.

Dynamo cannot trace `torch.cuda.is_current_stream_capturing()`: under `fullgraph=True` the
forward fails to compile, otherwise it breaks the graph there (shared/GROUND-TRUTH.md section 1;
stream and event ops themselves trace). Compile-safe rewrites decide on Python state only, which
Dynamo guards on; a rewrite that needs the capture state at run time is not applied and its
findings are reported "not fixed" with `NEEDS_CAPTURE_STATE`.

The setting is True, False, or None for "auto": on in a module where torch.compile is applied
(`@torch.compile`, `torch.compile(...)`), the facts OFL301 finds its roots with.
"""

from __future__ import annotations

from offlint.analysis.model import ModuleModel
from offlint.analysis.rules.ofl301_capture_check_in_compiled_code import (
    _compile_calls,
    _compiled_roots,
)

AUTO = "auto"

NEEDS_CAPTURE_STATE = (
    "compile-safe: this rewrite needs the capture state at run time (`is_current_stream_capturing()`), "
    "which torch.compile(fullgraph=True) cannot trace; fix it with --no-compile-safe where this code "
    "is not compiled"
)


def uses_torch_compile(model: ModuleModel) -> bool:
    """The module compiles something: a function or module it names as OFL301's roots, or any
    `torch.compile(...)` call (its target may be imported)."""
    return bool(_compiled_roots(model)) or next(iter(_compile_calls(model)), None) is not None


def compile_safe_for(model: ModuleModel, setting: bool | None) -> bool:
    """The setting for this module: as given, or (None, "auto") whether it uses torch.compile."""
    if setting is not None:
        return setting
    return model.remembered(("uses torch.compile",), lambda: uses_torch_compile(model))


def parse_setting(value: object) -> bool | None:
    """`[tool.offlint.fix] compile-safe`: "auto" (None), true or false; raises ValueError for
    anything else."""
    if isinstance(value, bool):
        return value
    if value == AUTO:
        return None
    raise ValueError(f'compile-safe must be "auto", true or false, not {value!r}')
