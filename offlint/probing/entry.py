"""`offlint probe --entry`: the user's own model, with the user's own offloading, probed as is.

The protocol (README, "offlint probe --entry"): `--entry pkg.module:build` or
`path/to/file.py:build` names a callable (default name `build`) that takes the `--init-arg`
values as keyword arguments and returns the model with its offloading already installed:

- a `ProbedModel` (below), or any object or mapping with the same names, or a tuple
  `(model, make_inputs[, reference])`;
- `model`: called as `model(x)`, `model(*args)` or `model(**kwargs)` as `make_inputs` returns a
  tensor, a tuple or a dict; it returns a tensor or a tuple/list/dict of tensors;
- `make_inputs(batch_size)`: fresh inputs for one step on the GPU (new values each call);
- `reference` (optional): the same function without offloading (e.g. the model kept on the GPU).
  Without it every output is compared with a second eager forward of the model on the same
  inputs, which cannot see an error the model makes the same way every time;
- `batch_sizes` (optional): the sizes to capture when `--batch-sizes` is not given;
- `update_weights()` (optional): change some weights in place, in the model and the reference
  alike, as a weight update does; without it the weight-update phase is skipped;
- `expected_copies` (optional): H2D copies one step should make (default: the number of host
  tensors found in the model, else as many as an eager step makes);
- `host_tensors` (optional): the host copies of offloaded weights when they are not the model's
  own parameters (static slot buffers), for the report's bytes and bandwidth.

Nothing here runs at import of `offlint.probing`; torch is imported by the caller.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offlint.probing.adapters import ENTRY_NAMES as ADAPTER_ENTRY_NAMES
from offlint.probing.errors import ProbeUsageError, one_line
from offlint.probing.options import looks_like_module

DEFAULT_FUNCTION = "build"


@dataclass
class ProbedModel:
    """What `build()` returns (any object with these attributes will do)."""

    model: Callable[..., Any]
    make_inputs: Callable[[int], Any]
    reference: Callable[..., Any] | None = None
    batch_sizes: tuple[int, ...] | None = None
    update_weights: Callable[[], Any] | None = None
    expected_copies: int | None = None
    host_tensors: list[Any] = field(default_factory=list)
    name: str | None = None


@dataclass(frozen=True)
class LoadedEntry:
    spec: str
    function: Callable[..., Any]
    source_file: str | None

    @property
    def label(self) -> str:
        name = getattr(self.function, "__qualname__", DEFAULT_FUNCTION)
        if self.source_file and not looks_like_module(self.spec):
            return f"{Path(self.source_file).name}:{name}"
        return f"{getattr(self.function, '__module__', '?')}:{name}"


def bundled_entries_dir() -> Path:
    return Path(__file__).resolve().parent / "examples"


def bundled_entry_names() -> list[str]:
    return sorted(
        path.stem.replace("_", "-")
        for path in bundled_entries_dir().glob("*.py")
        if not path.name.startswith("_")
    )


def resolve_entry_spec(spec: str) -> str:
    """A bundled example's name (`group-offload`) → its file, an adapter's name
    (`sglang-offloader-v2`) → its module; a file made absolute."""
    head, sep, attr = spec.partition(":")
    bundled = bundled_entries_dir() / (head.replace("-", "_") + ".py")
    if "/" not in head and not head.endswith(".py") and "." not in head and bundled.is_file():
        return f"{bundled}:{attr or DEFAULT_FUNCTION}"
    if head in ADAPTER_ENTRY_NAMES:  # a real library's adapter (offlint/probing/adapters/)
        return ADAPTER_ENTRY_NAMES[head].partition(":")[0] + ":" + (attr or DEFAULT_FUNCTION)
    if looks_like_module(spec):
        return spec
    return str(Path(head).resolve()) + sep + attr


def import_user_module(spec: str, what: str) -> tuple[Any, str]:
    """Import the module part of `spec` (`pkg.mod:attr` or `file.py:attr`); errors are one line
    with the file and line that raised them."""
    if looks_like_module(spec):
        name = spec.partition(":")[0]
        try:
            return importlib.import_module(name), name
        except BaseException as exc:  # SystemExit and KeyboardInterrupt at import too
            raise ProbeUsageError(
                f"cannot import {what} module {name!r}: {one_line(exc)}"
            ) from None
    path = Path(spec.partition(":")[0])
    if not path.is_file():
        raise ProbeUsageError(f"{what} file not found: {path}")
    module_name = "offlint_probe_entry_" + re.sub(r"\W", "_", str(path.resolve()))
    if module_name in sys.modules:
        return sys.modules[module_name], str(path)
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ProbeUsageError(f"cannot import {what} {path}: not a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.parent))
    try:
        loader_spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[module_name]
        raise ProbeUsageError(f"cannot import {what} {path}: {one_line(exc)}") from None
    finally:
        sys.path.remove(str(path.parent))
    return module, str(path)


def load_entry(spec: str) -> LoadedEntry:
    module, where = import_user_module(spec, "--entry")
    attr = spec.partition(":")[2] or DEFAULT_FUNCTION
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ProbeUsageError(
                f"--entry {where} has no {attr!r} (the function returning the model)"
            )
        value = getattr(value, part)
    if not callable(value):
        raise ProbeUsageError(f"--entry {spec}: {attr} is a {type(value).__name__}, not callable")
    try:
        source_file: str | None = inspect.getsourcefile(value)
    except TypeError:
        source_file = getattr(module, "__file__", None)
    return LoadedEntry(spec=spec, function=value, source_file=source_file)


def check_build_arguments(entry: LoadedEntry, kwargs: Mapping[str, Any]) -> None:
    """`--init-arg` names the build function does not take are an error before any GPU work."""
    try:
        signature = inspect.signature(entry.function)
    except (TypeError, ValueError):
        return
    parameters = signature.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return
    names = {p.name for p in parameters}
    for key in kwargs:
        if key not in names:
            raise ProbeUsageError(f"{entry.label}() takes no argument {key!r} (from --init-arg)")
    missing = [
        p.name
        for p in parameters
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in kwargs
    ]
    if missing:
        raise ProbeUsageError(
            f"{entry.label}() needs {missing[0]!r}: give it with --init-arg {missing[0]}=VALUE"
        )


def normalize(built: Any, label: str) -> ProbedModel:
    """`build()`'s return value as a ProbedModel; a wrong shape is one line naming what is
    missing."""
    if isinstance(built, ProbedModel):
        probed = built
    elif isinstance(built, tuple) and 2 <= len(built) <= 3:
        probed = ProbedModel(*built)
    else:

        def get(name: str) -> Any:
            if isinstance(built, Mapping):
                return built.get(name)
            return getattr(built, name, None)

        model, make_inputs = get("model"), get("make_inputs")
        if model is None or make_inputs is None:
            raise ProbeUsageError(
                f"{label}() returned a {type(built).__name__}: expected an object or dict with "
                "'model' and 'make_inputs' (and optionally 'reference'), or a tuple "
                "(model, make_inputs[, reference])"
            )
        probed = ProbedModel(
            model=model,
            make_inputs=make_inputs,
            reference=get("reference"),
            batch_sizes=get("batch_sizes"),
            update_weights=get("update_weights"),
            expected_copies=get("expected_copies"),
            host_tensors=list(get("host_tensors") or []),
            name=get("name"),
        )
    if not callable(probed.model) or not callable(probed.make_inputs):
        raise ProbeUsageError(f"{label}(): 'model' and 'make_inputs' must be callable")
    if probed.batch_sizes is not None:
        probed.batch_sizes = tuple(int(b) for b in probed.batch_sizes)
        if len(set(probed.batch_sizes)) < 2:
            raise ProbeUsageError(f"{label}(): batch_sizes needs at least two different sizes")
    return probed
