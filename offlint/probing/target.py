"""Load the TARGET offloader class and recognise its shape.

TARGET is `path/to/file.py[:Class]` or `package.module[:Class]`. Two shapes are driven:

- an *orchestrator* (SGLang's `OffloaderV2`): it has `wrap_modules(modules, ...)` and usually
  `post_init()`, and installs its own hooks. The probe constructs it and calls those two.
- a *module offloader* (SGLang's `_ModuleOffloader`): one instance per offloaded module, with a
  prefetch (`start_onload`) and a wait (`wait_and_get_device_tensors`) method, and usually a
  release (`offload`), and, once `offlint fix` gave it one, an end-of-forward join
  (`join_pending_copies`). The probe installs the hooks an inference engine installs around it.

The class is used as it is: never copied, never patched. Every problem here is a
`ProbeUsageError` (exit 2) with one line that says what to change.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offlint.probing.errors import ProbeUsageError, one_line
from offlint.probing.options import MethodNames, looks_like_module

# Candidate method names, most specific first; `--*-method` options name others.
WRAP_NAMES = ("wrap_modules",)
POST_INIT_NAMES = ("post_init",)
PREFETCH_NAMES = ("start_onload", "start_prefetch", "prefetch", "onload")
WAIT_NAMES = ("wait_and_get_device_tensors", "wait_and_get", "get_device_tensors", "wait")
RELEASE_NAMES = ("offload", "release")
# The end-of-forward join `offlint fix --strategy overlap` writes when no class owns the module
# list (vLLM's shape): the engine calls it on every offloader after each forward.
JOIN_NAMES = ("join_pending_copies", "_offlint_join_pending_copies")

ORCHESTRATOR = "orchestrator"
MODULE_OFFLOADER = "module-offloader"


@dataclass(frozen=True)
class ResolvedMethods:
    wrap: str | None
    post_init: str | None
    prefetch: str | None
    wait: str | None
    release: str | None
    join: str | None


@dataclass(frozen=True)
class LoadedTarget:
    spec: str
    cls: type
    shape: str
    methods: ResolvedMethods
    source_file: str | None

    @property
    def label(self) -> str:
        """`file.py:Class` for a file TARGET (its module name is made up), else `module:Class`."""
        if not looks_like_module(self.spec) and self.source_file:
            return f"{Path(self.source_file).name}:{self.cls.__qualname__}"
        return f"{self.cls.__module__}:{self.cls.__qualname__}"


def _has_method(cls: type, name: str) -> bool:
    return callable(getattr(cls, name, None))


class _MissingMethod(Exception):
    pass


def _pick(cls: type, given: str | None, candidates: tuple[str, ...], option: str) -> str | None:
    if given is not None:
        if not _has_method(cls, given):
            raise _MissingMethod(f"{cls.__qualname__} has no method {given!r} (given by {option})")
        return given
    return next((name for name in candidates if _has_method(cls, name)), None)


def resolve_shape(cls: type, names: MethodNames) -> tuple[str, ResolvedMethods] | None:
    """The shape of `cls` and the methods the probe will call, or None if it has neither.
    Raises `_MissingMethod` when a method named by the user is missing."""
    wrap = _pick(cls, names.wrap, WRAP_NAMES, "--wrap-method")
    post_init = _pick(cls, names.post_init, POST_INIT_NAMES, "--post-init-method")
    prefetch = _pick(cls, names.prefetch, PREFETCH_NAMES, "--prefetch-method")
    wait = _pick(cls, names.wait, WAIT_NAMES, "--wait-method")
    release = _pick(cls, names.release, RELEASE_NAMES, "--release-method")
    join = _pick(cls, names.join, JOIN_NAMES, "--join-method")
    methods = ResolvedMethods(wrap, post_init, prefetch, wait, release, join)
    if wrap is not None:
        return ORCHESTRATOR, methods
    if prefetch is not None and wait is not None:
        return MODULE_OFFLOADER, methods
    return None


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise ProbeUsageError(f"TARGET file not found: {path}")
    # A name of our own, so a user file called `torch.py` or `offloader.py` shadows nothing.
    module_name = "offlint_probe_target_" + re.sub(r"\W", "_", str(path.resolve()))
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ProbeUsageError(f"cannot import TARGET {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    sys.path.insert(0, str(path.parent))  # so the file can import its siblings
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # SystemExit at import too: one line, never an escape
        del sys.modules[module_name]
        raise ProbeUsageError(f"cannot import TARGET {path}: {one_line(exc)}") from None
    finally:
        sys.path.remove(str(path.parent))
    return module


def _import_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except BaseException as exc:
        raise ProbeUsageError(f"cannot import TARGET module {name!r}: {one_line(exc)}") from None


def _classes_defined_in(module: Any) -> list[type]:
    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value) and value.__module__ == module.__name__
    ]


def load_target(spec: str, names: MethodNames | None = None) -> LoadedTarget:
    names = names or MethodNames()
    if looks_like_module(spec):
        module_name, _, attr = spec.partition(":")
        module = _import_module(module_name)
        where = module_name
    else:
        head, _, attr = spec.partition(":")
        module = _import_file(Path(head))
        where = head

    if attr:
        value: Any = module
        for part in attr.split("."):
            if not hasattr(value, part):
                raise ProbeUsageError(f"TARGET {where} has no attribute {attr!r}")
            value = getattr(value, part)
        if not inspect.isclass(value):
            kind = type(value).__name__
            raise ProbeUsageError(f"TARGET {spec} is a {kind}, not an offloader class")
        try:
            shape = resolve_shape(value, names)
        except _MissingMethod as exc:
            raise ProbeUsageError(f"TARGET {spec}: {exc}") from None
        if shape is None:
            raise ProbeUsageError(
                f"TARGET {spec} is not an offloader in the prefetch/wait shape: it has neither "
                f"{WRAP_NAMES[0]}() nor {PREFETCH_NAMES[0]}() + {WAIT_NAMES[0]}() (name its "
                "methods with --wrap-method, or --prefetch-method and --wait-method)"
            )
        cls = value
    else:
        found = []
        for candidate in _classes_defined_in(module):
            try:
                candidate_shape = resolve_shape(candidate, names)
            except _MissingMethod:
                continue  # a class without the method the user named is not the one they mean
            if candidate_shape is not None:
                found.append((candidate, candidate_shape))
        orchestrators = [item for item in found if item[1][0] == ORCHESTRATOR]
        pool = orchestrators or found
        if not pool:
            raise ProbeUsageError(
                f"no offloader class found in {where} (looked for {WRAP_NAMES[0]}(), or "
                f"{PREFETCH_NAMES[0]}() + {WAIT_NAMES[0]}()); name one as {where}:Class"
            )
        if len(pool) > 1:
            listed = ", ".join(sorted(item[0].__qualname__ for item in pool))
            raise ProbeUsageError(
                f"several offloader classes in {where} ({listed}); name one as {where}:Class"
            )
        cls, shape = pool[0]

    try:
        source_file: str | None = inspect.getsourcefile(cls)
    except TypeError:
        source_file = None
    return LoadedTarget(
        spec=spec, cls=cls, shape=shape[0], methods=shape[1], source_file=source_file
    )


def constructor_kwargs(cls: type, known: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Arguments for `cls(...)`: `given` (user's) first, then the `known` values whose names the
    constructor takes. A required parameter left without a value is an error naming it."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return {**known, **given}
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    kwargs: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name in given:
            kwargs[name] = given[name]
        elif name in known:
            kwargs[name] = known[name]
        elif parameter.default is parameter.empty:
            raise ProbeUsageError(
                f"{cls.__qualname__}() needs {name!r}, which the probe cannot supply: give it "
                f"with --init-arg {name}=VALUE or init-kwargs in [tool.offlint.probe]"
            )
    unknown = [name for name in given if name not in kwargs]
    if unknown and not takes_any:
        raise ProbeUsageError(f"{cls.__qualname__}() takes no argument {unknown[0]!r}")
    if takes_any:
        kwargs.update({name: value for name, value in given.items() if name not in kwargs})
    return kwargs


def check_constructor(target: LoadedTarget, given: dict[str, Any]) -> None:
    """The constructor can be called with what the probe supplies at run time (stand-ins here:
    no CUDA work) and the user's `--init-arg`s; else one line naming what is missing."""
    stand_ins = (
        {
            "module": None,
            "alt_stream": None,
            "whitelist_param_names": None,
            "mode": "cpu",
            "resident_parameter_ids": set(),
        }
        if target.shape == MODULE_OFFLOADER
        else {"group_size": 1, "num_in_group": 1, "prefetch_step": 1, "mode": "cpu"}
    )
    constructor_kwargs(target.cls, stand_ins, given)
