"""What one scenario worker is asked to do, as JSON (no torch here: the parent writes it)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from offlint.probing.errors import ProbeUsageError
from offlint.probing.options import MethodNames, ModelConfig, ProbeOptions


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    target: str
    model: ModelConfig
    device_index: int = 0
    methods: MethodNames = field(default_factory=MethodNames)
    init_kwargs: dict[str, Any] = field(default_factory=dict)
    replay_rounds: int = 3
    warmup_iters: int = 10
    timing_iters: int = 100
    timing: bool = True
    profile: bool = True
    compile: bool = False
    seed: int = 0
    # `--entry`: the user's build() (entry.py); `target` is then the same string.
    entry: bool = False
    watch: bool = True
    trace_dir: str | None = None
    batch_sizes_given: bool = False
    # `--compiled`: "fullgraph" or "reduce-overhead" (scenario.py), None for the eager forward.
    compiled: str | None = None
    # `--capture-mode`: whole, pieces, segmented-sglang or segmented-vllm (capture_modes.py).
    capture_mode: str = "whole"

    def __post_init__(self) -> None:
        # A spec written by hand or by an older parent is checked before a GPU is touched.
        from offlint.probing.options import parse_capture_mode

        try:
            parse_capture_mode(self.capture_mode)
        except ValueError as exc:
            raise ProbeUsageError(f"capture_mode: {exc}") from None
        if self.capture_mode != "whole" and self.compiled is not None:
            raise ProbeUsageError(
                f"capture_mode {self.capture_mode} captures the eager forward, not --compiled"
            )

    @classmethod
    def from_options(
        cls, name: str, target: str, options: ProbeOptions, entry: bool = False
    ) -> ScenarioSpec:
        return cls(
            name=name,
            target=target,
            entry=entry,
            model=options.model,
            methods=options.methods,
            init_kwargs=dict(options.init_kwargs),
            replay_rounds=options.replay_rounds,
            warmup_iters=options.warmup_iters,
            timing_iters=options.timing_iters,
            timing=options.timing,
            profile=options.profile,
            compile=options.compile,
            seed=options.seed,
            watch=options.watch,
            trace_dir=options.trace_dir,
            batch_sizes_given=options.batch_sizes_given,
            compiled=options.compiled,
            capture_mode=options.capture_mode,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScenarioSpec:
        model = dict(data["model"])
        model["batch_sizes"] = tuple(model["batch_sizes"])
        return cls(
            **{
                **data,
                "model": ModelConfig(**model),
                "methods": MethodNames(**data.get("methods", {})),
            }
        )

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2), encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> ScenarioSpec:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
