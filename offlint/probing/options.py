"""Probe options: defaults, `[tool.offlint.probe]` in pyproject.toml, command-line values.

Precedence: a value given on the command line beats pyproject, which beats the default. Every
value goes through the same converter whichever way it came, so `batch-sizes = [4096, 2048]` in
pyproject and `--batch-sizes 4096,2048` mean the same, and a bad value is one clear line (exit 2).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from offlint.probing.errors import ProbeUsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}


@dataclass(frozen=True)
class MethodNames:
    """Method names of the TARGET class; None means "detect"."""

    wrap: str | None = None
    post_init: str | None = None
    prefetch: str | None = None
    wait: str | None = None
    release: str | None = None
    join: str | None = None


@dataclass(frozen=True)
class ModelConfig:
    """The synthetic model: `layers` layers `y = tanh(x @ W)` of size `hidden`; the last of every
    `offload_every` layers is offloaded; `prefetch` offloaded layers are loaded ahead."""

    layers: int = 16
    hidden: int = 4096
    dtype: str = "bfloat16"
    batch_sizes: tuple[int, ...] = (4096, 2048)
    offload_every: int = 4
    prefetch: int = 1

    @property
    def offloaded_layers(self) -> list[int]:
        return [i for i in range(self.layers) if i % self.offload_every == self.offload_every - 1]


@dataclass(frozen=True)
class ProbeOptions:
    target: str | None = None
    # `--entry`: the user's own model (entry.py's protocol), or a bundled example's name.
    entry: str | None = None
    gpus: tuple[int, ...] = (0,)
    model: ModelConfig = field(default_factory=ModelConfig)
    replay_rounds: int = 3
    warmup_iters: int = 10
    timing_iters: int = 100
    tolerance: float = 2e-2
    max_graph_slowdown: float = 1.1
    min_overlap_speedup: float = 1.6
    timing: bool = True
    profile: bool = True
    compile: bool = False
    # `--compiled fullgraph|reduce-overhead`: the life cycle with a compiled forward.
    compiled: str | None = None
    # `--capture-mode`: how a graph runner captures the forward (capture_modes.py).
    capture_mode: str = "whole"
    # several modes asked for (`capture-mode = ["whole", "pieces"]`): one run per mode, in order
    capture_modes: tuple[str, ...] = ()
    # Watch the stream/event calls of the life cycle (sanitizer.py, recording only) so that a
    # capture failure is reported with the call that caused it and its rule code.
    watch: bool = True
    # `--trace DIR`: keep the profiler traces the H2D copies are counted from.
    trace_dir: str | None = None
    # The batch sizes came from the user (command line or pyproject), not the default: an
    # `--entry` that names its own sizes keeps them otherwise.
    batch_sizes_given: bool = False
    scenarios: tuple[str, ...] = ()
    methods: MethodNames = field(default_factory=MethodNames)
    init_kwargs: Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float = 900.0
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["init_kwargs"] = dict(self.init_kwargs)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeOptions:
        """The options of a recorded run (`to_json`'s output; keys it lacks keep defaults)."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        model = dict(values.pop("model", {}))
        if "batch_sizes" in model:
            model["batch_sizes"] = tuple(model["batch_sizes"])
        for key in ("gpus", "scenarios", "capture_modes"):
            if key in values:
                values[key] = tuple(values[key])
        methods = MethodNames(**values.pop("methods", {}))
        return cls(**values, model=ModelConfig(**model), methods=methods)


# --- converters: each takes a CLI string or a TOML value and returns the typed value -----------


def _positive_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected a positive integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a positive integer, got {value!r}") from None
    if number < 1 or (isinstance(value, float) and value != number):
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer >= 0")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected an integer >= 0, got {value!r}") from None
    if number < 0:
        raise ValueError(f"expected an integer >= 0, got {value!r}")
    return number


def _positive_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a positive number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a positive number, got {value!r}") from None
    if not number > 0:
        raise ValueError(f"expected a positive number, got {value!r}")
    return number


def _int_list(value: Any, convert: Callable[[Any], int]) -> tuple[int, ...]:
    if isinstance(value, str):
        parts: list[Any] = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, int) and not isinstance(value, bool):
        parts = [value]
    elif isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        raise ValueError(f"expected a comma-separated list of integers, got {value!r}")
    if not parts:
        raise ValueError("expected at least one integer")
    return tuple(convert(part) for part in parts)


def parse_gpus(value: Any) -> tuple[int, ...]:
    gpus = _int_list(value, _non_negative_int)
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"a GPU is listed twice in {value!r}")
    return gpus


def parse_batch_sizes(value: Any) -> tuple[int, ...]:
    sizes = _int_list(value, _positive_int)
    if len(set(sizes)) < 2:
        # The life cycle captures one graph per batch size, sharing one memory pool; one size
        # would not exercise the pool or the interleaved replays.
        raise ValueError(f"expected at least two different batch sizes, got {value!r}")
    return sizes


def parse_dtype(value: Any) -> str:
    name = str(value).lower().removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {value!r} (one of bfloat16, float16, float32)")
    return DTYPES[name]


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(f"expected true or false, got {value!r}")


def _string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def _identifier(value: Any) -> str:
    name = _string(value)
    if not name.isidentifier():
        raise ValueError(f"{name!r} is not a method name")
    return name


COMPILED_MODES = ("fullgraph", "reduce-overhead")


def parse_compiled(value: Any) -> str:
    name = str(value).strip().lower()
    if name not in COMPILED_MODES:
        raise ValueError(f"expected one of {', '.join(COMPILED_MODES)}, got {value!r}")
    return name


# whole: one torch.cuda.graph; pieces: two graphs (a piecewise runner); segmented-*: graphs
# with an eager break between, joining forks at segment ends as SGLang does or not (vLLM).
CAPTURE_MODES = ("whole", "pieces", "segmented-sglang", "segmented-vllm")


def parse_capture_mode(value: Any) -> str | tuple[str, ...]:
    """One capture mode, or several (a list, or `whole,pieces`): the probe then runs once per mode."""
    if isinstance(value, (list, tuple)) or (isinstance(value, str) and "," in value):
        parts = value if isinstance(value, (list, tuple)) else value.split(",")
        names: list[str] = []
        for part in parts:
            name = parse_capture_mode(part) if str(part).strip() else None
            if isinstance(name, tuple):
                raise ValueError(f"expected capture modes ({', '.join(CAPTURE_MODES)}), got {value!r}")
            if name is not None and name not in names:
                names.append(name)
        if not names:
            raise ValueError(f"expected capture modes ({', '.join(CAPTURE_MODES)}), got {value!r}")
        return tuple(names) if len(names) > 1 else names[0]
    name = str(value).strip().lower()
    if name not in CAPTURE_MODES:
        raise ValueError(f"expected one of {', '.join(CAPTURE_MODES)}, got {value!r}")
    return name


def _string_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"expected a list of names, got {value!r}")


def parse_init_args(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """`--init-arg mode=cpu --init-arg budget=2` → {"mode": "cpu", "budget": 2} (JSON values,
    or the plain string when the value is not JSON)."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ValueError(f"expected NAME=VALUE, got {pair!r}")
        try:
            kwargs[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key.strip()] = raw
    return kwargs


def _init_kwargs(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (list, tuple)):
        return parse_init_args(list(value))
    raise ValueError(f"expected a table of constructor arguments, got {value!r}")


# Every settable key: pyproject spelling (kebab-case; snake_case is accepted too) → converter.
_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "target": _string,
    "entry": _string,
    "gpu": parse_gpus,
    "layers": _positive_int,
    "hidden": _positive_int,
    "dtype": parse_dtype,
    "batch-sizes": parse_batch_sizes,
    "offload-every": _positive_int,
    "prefetch": _positive_int,
    "replays": _positive_int,
    "warmup-iters": _non_negative_int,
    "timing-iters": _positive_int,
    "tolerance": _positive_float,
    "max-graph-slowdown": _positive_float,
    "min-overlap-speedup": _positive_float,
    "timing": _boolean,
    "profile": _boolean,
    "compile": _boolean,
    "compiled": parse_compiled,
    "capture-mode": parse_capture_mode,
    "watch": _boolean,
    "trace": _string,
    "scenarios": _string_list,
    "wrap-method": _identifier,
    "post-init-method": _identifier,
    "prefetch-method": _identifier,
    "wait-method": _identifier,
    "release-method": _identifier,
    "join-method": _identifier,
    "init-kwargs": _init_kwargs,
    "timeout": _positive_float,
    "seed": _non_negative_int,
}


def find_pyproject(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def read_pyproject_settings(path: Path) -> dict[str, Any]:
    """The `[tool.offlint.probe]` table of `path`, keys normalised to kebab-case, validated."""
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise ProbeUsageError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProbeUsageError(f"{path} is not valid TOML: {exc}") from None
    table = document.get("tool", {}).get("offlint", {}).get("probe", {})
    if not isinstance(table, dict):
        raise ProbeUsageError(f"[tool.offlint.probe] in {path} must be a table")
    settings: dict[str, Any] = {}
    for raw_key, raw_value in table.items():
        key = raw_key.replace("_", "-")
        if key == "gpus":
            key = "gpu"
        if key not in _CONVERTERS:
            known = ", ".join(sorted(_CONVERTERS))
            raise ProbeUsageError(
                f"unknown key {raw_key!r} in [tool.offlint.probe] of {path} (known: {known})"
            )
        try:
            settings[key] = _CONVERTERS[key](raw_value)
        except ValueError as exc:
            raise ProbeUsageError(f"{raw_key} in [tool.offlint.probe] of {path}: {exc}") from None
    for key in ("target", "entry"):
        target = settings.get(key)
        if target is not None and not looks_like_module(target):
            # A file TARGET in pyproject is relative to the pyproject, not to the current
            # directory.
            head, sep, attr = target.partition(":")
            if not Path(head).is_absolute():
                settings[key] = str((path.parent / head).resolve()) + sep + attr
    return settings


def looks_like_module(target: str) -> bool:
    """`pkg.mod:Class` rather than `path/file.py[:Class]`."""
    head = target.split(":", 1)[0]
    return not (head.endswith(".py") or "/" in head or "\\" in head)


def build_options(cli: Mapping[str, Any], pyproject: Mapping[str, Any]) -> ProbeOptions:
    """Merge validated pyproject settings with the values the user gave on the command line
    (`cli` holds only those, keyed like `_CONVERTERS`) and check that they fit together."""
    merged: dict[str, Any] = dict(pyproject)
    for key, value in cli.items():
        if key not in _CONVERTERS:
            raise KeyError(key)
        try:
            merged[key] = _CONVERTERS[key](value)
        except ValueError as exc:
            raise ProbeUsageError(f"--{key}: {exc}") from None

    model = ModelConfig()
    model = replace(
        model,
        layers=merged.get("layers", model.layers),
        hidden=merged.get("hidden", model.hidden),
        dtype=merged.get("dtype", model.dtype),
        batch_sizes=merged.get("batch-sizes", model.batch_sizes),
        offload_every=merged.get("offload-every", model.offload_every),
        prefetch=merged.get("prefetch", model.prefetch),
    )
    offloaded = len(model.offloaded_layers)
    if offloaded == 0:
        raise ProbeUsageError(
            f"--offload-every {model.offload_every} offloads no layer of {model.layers}"
        )
    if model.prefetch > offloaded:
        raise ProbeUsageError(
            f"--prefetch {model.prefetch} is more than the {offloaded} offloaded layers"
        )
    defaults = ProbeOptions()
    if merged.get("target") is not None and merged.get("entry") is not None:
        raise ProbeUsageError("give a TARGET offloader class or --entry, not both")
    asked = merged.get("capture-mode", defaults.capture_mode)
    capture_modes: tuple[str, ...] = asked if isinstance(asked, tuple) else ()
    capture_mode = capture_modes[0] if capture_modes else asked
    if (capture_mode != "whole" or capture_modes) and merged.get("compiled") is not None:
        # The split hooks would run inside the compiled forward (Dynamo traces them), and
        # reduce-overhead makes its own graphs.
        raise ProbeUsageError(
            f"--capture-mode {capture_mode} captures the eager forward: give it without --compiled"
        )
    return ProbeOptions(
        target=merged.get("target"),
        entry=merged.get("entry"),
        gpus=merged.get("gpu", defaults.gpus),
        model=model,
        replay_rounds=merged.get("replays", defaults.replay_rounds),
        warmup_iters=merged.get("warmup-iters", defaults.warmup_iters),
        timing_iters=merged.get("timing-iters", defaults.timing_iters),
        tolerance=merged.get("tolerance", defaults.tolerance),
        max_graph_slowdown=merged.get("max-graph-slowdown", defaults.max_graph_slowdown),
        min_overlap_speedup=merged.get("min-overlap-speedup", defaults.min_overlap_speedup),
        timing=merged.get("timing", defaults.timing),
        profile=merged.get("profile", defaults.profile),
        compile=merged.get("compile", defaults.compile),
        compiled=merged.get("compiled", defaults.compiled),
        capture_mode=capture_mode,
        capture_modes=capture_modes,
        watch=merged.get("watch", defaults.watch),
        trace_dir=merged.get("trace", defaults.trace_dir),
        batch_sizes_given="batch-sizes" in merged,
        scenarios=merged.get("scenarios", defaults.scenarios),
        methods=MethodNames(
            wrap=merged.get("wrap-method"),
            post_init=merged.get("post-init-method"),
            prefetch=merged.get("prefetch-method"),
            wait=merged.get("wait-method"),
            release=merged.get("release-method"),
            join=merged.get("join-method"),
        ),
        init_kwargs=merged.get("init-kwargs", {}),
        timeout_s=merged.get("timeout", defaults.timeout_s),
        seed=merged.get("seed", defaults.seed),
    )
