"""One scenario: the life a decode graph runner gives an offloader, on one GPU, in one process.

Phases, in order (each recorded; a failing phase records its error and ends the ones that
depend on it):

1. baseline   the all-on-GPU model captured and replayed per batch size (the compute time) and
              the pinned H2D bandwidth (timing only);
2. attach     construct the TARGET, wrap the layers, post-init prefetch;
3. eager      an eager forward per batch size (the warm-up), each checked;
4. eager timing and the H2D copies of one eager step (side-stream overlap, no graph);
5. capture    per batch size, largest first: two eager warm-up forwards (as SGLang's graph runner
              does), then a capture into a memory pool shared by all graphs;
6. eager after capture: one eager forward right after the last capture, before any replay;
7. replays    of every graph, interleaved, each on a fresh input;
8. weight update: an in-place write into an offloaded layer's host weight, then a replay of each
              graph (a graph re-reads the host address at every replay);
9. graph timing and the H2D copies per replay;
10. compile   whether the hooked forward of a freshly attached model traces with
              `torch.compile(fullgraph=True)` (the "eager" backend: tracing is the question, not
              code generation).

Every check compares with the all-on-GPU reference model on the same input. Results are
measurements only; the parent process judges them (checks.py).
"""

from __future__ import annotations

import contextlib
import platform
import re
import shutil
import subprocess
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

from offlint.probing.attach import WEIGHT, attach
from offlint.probing.cuda_errors import describe_exception
from offlint.probing.model import (
    TORCH_DTYPES,
    LayerStack,
    build_stack,
    make_weights,
    random_input,
    relative_error,
)
from offlint.probing.spec import ScenarioSpec
from offlint.probing.target import LoadedTarget, load_target
from offlint.probing.timing import count_h2d_copies, h2d_bandwidth, median_ms

# Copies are counted over this many calls (and divided), so one stray copy cannot hide.
_PROFILED_CALLS = 3
# SGLang's graph runner runs each batch size twice eagerly before capturing it.
_WARMUPS_BEFORE_CAPTURE = 2


class _PhaseFailed(Exception):
    """A phase could not complete; its error is already recorded."""


class ScenarioRun:
    def __init__(self, spec: ScenarioSpec, device: torch.device | None = None):
        self.spec = spec
        self.config = spec.model
        # `device` is for tests that dry-run the life cycle on the CPU with torch.cuda faked.
        self.device = device or torch.device("cuda", spec.device_index)
        self.dtype = TORCH_DTYPES[spec.model.dtype]
        self.generator: torch.Generator | None = None
        self.target: LoadedTarget | None = None
        self.weights: list[torch.Tensor] = []
        self.reference: LayerStack | None = None
        self.model: LayerStack | None = None
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor, torch.Tensor]] = {}
        self.captured_any = False
        self.offloader: Any = None  # kept alive for the whole run
        self.result: dict[str, Any] = {
            "scenario": spec.name,
            "target": spec.target,
            "device_index": spec.device_index,
            "model": {
                "layers": spec.model.layers,
                "hidden": spec.model.hidden,
                "dtype": spec.model.dtype,
                "batch_sizes": list(spec.model.batch_sizes),
                "offload_every": spec.model.offload_every,
                "prefetch": spec.model.prefetch,
                "offloaded_layers": spec.model.offloaded_layers,
            },
            "phases": {},
            "phase_errors": [],
            "steps": [],
            "capture": None,
            "host_weights": [],
            "timing": {"reference_graph": {}, "eager": {}, "graph": {}, "h2d": None},
            "h2d": {"per_eager_step": {}, "per_replay": {}},
            "compile": None,
        }

    # --- bookkeeping -----------------------------------------------------------------------

    @property
    def target_files(self) -> list[str]:
        if self.target is None or self.target.source_file is None:
            return []
        return [self.target.source_file]

    def _phase(self, name: str, body: Callable[[], None]) -> bool:
        started = time.perf_counter()
        try:
            body()
        except _PhaseFailed:
            self.result["phases"][name] = "failed"
            return False
        except Exception as exc:
            self._record_error(name, exc)
            self.result["phases"][name] = "failed"
            return False
        finally:
            self.result.setdefault("phase_seconds", {})[name] = round(
                time.perf_counter() - started, 3
            )
        self.result["phases"][name] = "ok"
        return True

    def _skip(self, name: str, why: str) -> None:
        self.result["phases"][name] = f"skipped: {why}"

    def _record_error(self, phase: str, exc: BaseException) -> None:
        entry = {"phase": phase, **describe_exception(exc, self.target_files)}
        entry["traceback"] = "".join(traceback.format_exception(exc))[-6000:]
        self.result["phase_errors"].append(entry)
        _synchronize_quietly()

    def _input(self, batch: int) -> torch.Tensor:
        assert self.generator is not None
        return random_input(batch, self.config.hidden, self.dtype, self.device, self.generator)

    def _check(
        self, phase: str, batch: int, output: torch.Tensor, reference: torch.Tensor, note: str
    ) -> None:
        rel = relative_error(output, reference)
        self.result["steps"].append(
            {
                "phase": phase,
                "batch": batch,
                "rel_err": rel,
                "exact": bool(torch.equal(output, reference)),
                "note": note,
            }
        )

    def _eager_step(self, batch: int, note: str) -> None:
        assert self.model is not None and self.reference is not None
        phase = "eager_after_capture" if self.captured_any else "eager"
        x = self._input(batch)
        output = self.model(x)
        self._check(phase, batch, output, self.reference(x), note)

    def _replay_step(self, phase: str, batch: int, note: str) -> None:
        assert self.reference is not None
        graph, static_x, static_out = self.graphs[batch]
        x = self._input(batch)
        static_x.copy_(x)
        graph.replay()
        self._check(phase, batch, static_out, self.reference(x), note)

    # --- phases ----------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        with torch.no_grad():
            self._run_phases()
        self.result["wall_s"] = round(time.perf_counter() - started, 3)
        return self.result

    def _run_phases(self) -> None:
        spec = self.spec
        if not self._phase("setup", self._setup):
            return
        if spec.timing:
            self._phase("baseline", self._baseline)
        else:
            self._skip("baseline", "timing off")
        if not self._phase("attach", self._attach):
            return
        if not self._phase("eager", self._eager):
            return
        if spec.timing or spec.profile:
            self._phase("eager_timing", self._eager_timing)
        captured = self._phase("capture", self._capture)
        dependent = ("eager_after_capture", "replay", "weight_update", "graph_timing")
        if captured:
            self._phase("eager_after_capture", self._eager_after_capture)
            if self._phase("replay", self._replays):
                self._phase("weight_update", self._weight_update)
                if spec.timing or spec.profile:
                    self._phase("graph_timing", self._graph_timing)
        else:
            for name in dependent:
                self._skip(name, "capture failed")
        if spec.compile:
            self._phase("compile", self._compile_check)
        else:
            self._skip("compile", "compile check off")

    def _setup(self) -> None:
        torch.cuda.set_device(self.device)
        self.result["environment"] = environment(self.device)
        self.target = load_target(self.spec.target, self.spec.methods)
        self.result["target_class"] = self.target.label
        self.result["target_shape"] = self.target.shape
        self.result["target_file"] = self.target.source_file
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.spec.seed)
        self.weights = make_weights(
            self.config.layers, self.config.hidden, self.dtype, self.device, self.generator
        )
        self.reference = build_stack(self.weights).to(self.device)

    def _baseline(self) -> None:
        """All weights on the GPU: the compute floor, and the H2D bandwidth."""
        assert self.reference is not None
        timing = self.result["timing"]
        layer_bytes = self.weights[0].numel() * self.weights[0].element_size()
        timing["h2d"] = h2d_bandwidth(
            layer_bytes, self.device, self.spec.warmup_iters, self.spec.timing_iters
        )
        pool = torch.cuda.graph_pool_handle()
        # Every graph of a shared pool stays alive until the last is captured: releasing one
        # can release the pool under the next capture.
        graphs = []
        for batch in self.config.batch_sizes:
            static_x = self._input(batch)
            for _ in range(_WARMUPS_BEFORE_CAPTURE):
                self.reference(static_x)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.reference(static_x)
            graphs.append(graph)
            timing["reference_graph"][str(batch)] = median_ms(
                graph.replay, self.spec.warmup_iters, self.spec.timing_iters
            )
        torch.cuda.synchronize()
        del graphs
        torch.cuda.empty_cache()

    def _attach(self) -> None:
        assert self.target is not None
        self.model = build_stack(self.weights).to(self.device)
        attached = attach(self.target, self.model, self.config, dict(self.spec.init_kwargs))
        self.result["constructor"] = attached.constructor
        self.offloader = attached.offloader
        host_weights = []
        for index, layer in enumerate(self.model.layers):
            weight = layer.get_parameter(WEIGHT)
            if weight.device != self.device:
                host_weights.append(
                    {
                        "layer": index,
                        "device": str(weight.device),
                        "pinned": bool(weight.device.type == "cpu" and weight.is_pinned()),
                        "bytes": weight.numel() * weight.element_size(),
                    }
                )
        self.result["host_weights"] = host_weights

    def _eager(self) -> None:
        for batch in self.config.batch_sizes:
            self._eager_step(batch, "first eager forward (warm-up)")

    def _eager_timing(self) -> None:
        assert self.model is not None
        model = self.model
        heavy = self.config.batch_sizes[0]
        if self.spec.timing:
            timing = self.result["timing"]
            for batch in self.config.batch_sizes:
                x = self._input(batch)

                def step(x: torch.Tensor = x) -> torch.Tensor:
                    return model(x)

                timing["eager"][str(batch)] = median_ms(
                    step, self.spec.warmup_iters, self.spec.timing_iters
                )
        if self.spec.profile:
            x = self._input(heavy)
            h2d = self.result["h2d"]
            h2d["per_eager_step"][str(heavy)] = count_h2d_copies(lambda: model(x), _PROFILED_CALLS)
        # The timed forwards were eager too: check the model is still exact after them.
        self._eager_step(heavy, "eager forward after the timed eager steps")

    def _capture(self) -> None:
        assert self.model is not None
        pool = torch.cuda.graph_pool_handle()
        capture: dict[str, Any] = {"ok": False, "graphs": [], "error": None}
        self.result["capture"] = capture
        for batch in self.config.batch_sizes:
            for round_index in range(_WARMUPS_BEFORE_CAPTURE):
                self._eager_step(
                    batch, f"graph-runner warm-up {round_index + 1} before capturing batch {batch}"
                )
            static_x = self._input(batch)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph, pool=pool):
                    static_out = self.model(static_x)
            except Exception as exc:
                self.captured_any = True
                capture["graphs"].append({"batch": batch, "ok": False})
                capture["error"] = {"batch": batch, **describe_exception(exc, self.target_files)}
                capture["error"]["traceback"] = "".join(traceback.format_exception(exc))[-6000:]
                _synchronize_quietly()
                raise _PhaseFailed from None
            self.captured_any = True
            capture["graphs"].append({"batch": batch, "ok": True})
            self.graphs[batch] = (graph, static_x, static_out)
        capture["ok"] = True

    def _eager_after_capture(self) -> None:
        self._eager_step(
            self.config.batch_sizes[0],
            "first eager forward after the last capture, before any replay",
        )

    def _replays(self) -> None:
        for round_index in range(self.spec.replay_rounds):
            for batch in self.config.batch_sizes:
                self._replay_step("replay", batch, f"replay round {round_index + 1}")

    def _weight_update(self) -> None:
        """Write new values into the first offloaded layer's host weight, in place, as a weight
        update must (rebinding would leave the graphs reading the old storage), then replay."""
        assert self.model is not None and self.reference is not None
        layer_index = self.config.offloaded_layers[0]
        weight = self.model.layers[layer_index].get_parameter(WEIGHT)
        if weight.device.type != "cpu":
            self.result["weight_update"] = {
                "layer": layer_index,
                "applied": False,
                "why": f"the offloaded weight lives on {weight.device}, not in host memory",
            }
            return
        assert self.generator is not None
        new_weight = make_weights(1, self.config.hidden, self.dtype, self.device, self.generator)[0]
        torch.cuda.synchronize()  # no copy of the old values may still be reading the host buffer
        weight.copy_(new_weight.cpu())
        self.reference.layers[layer_index].get_parameter(WEIGHT).copy_(new_weight)
        torch.cuda.synchronize()
        self.result["weight_update"] = {"layer": layer_index, "applied": True}
        for batch in self.config.batch_sizes:
            self._replay_step(
                "replay_after_update",
                batch,
                f"replay after updating layer {layer_index}'s host weight",
            )

    def _graph_timing(self) -> None:
        timing = self.result["timing"]
        h2d = self.result["h2d"]
        for batch, (graph, _, _) in self.graphs.items():
            if self.spec.timing:
                timing["graph"][str(batch)] = median_ms(
                    graph.replay, self.spec.warmup_iters, self.spec.timing_iters
                )
            if self.spec.profile:
                h2d["per_replay"][str(batch)] = count_h2d_copies(graph.replay, _PROFILED_CALLS)

    def _compile_check(self) -> None:
        """A fresh model and offloader (the life cycle's may be mid-failure): does the hooked
        forward trace as one graph?"""
        assert self.target is not None and self.reference is not None
        model = build_stack(self.weights).to(self.device)
        attached = attach(self.target, model, self.config, dict(self.spec.init_kwargs))
        batch = self.config.batch_sizes[-1]
        x = self._input(batch)
        model(x)  # one eager forward first, as an engine warms up before compiling
        import torch._dynamo

        torch._dynamo.reset()
        outcome: dict[str, Any] = {"backend": "eager", "fullgraph": True}
        try:
            output = torch.compile(model, fullgraph=True, backend="eager")(x)
        except Exception as exc:
            outcome.update(_compile_failure(exc, self.target_files))
            outcome["ok"] = False
        else:
            outcome["ok"] = True
            outcome["rel_err"] = relative_error(output, self.reference(x))
        finally:
            torch._dynamo.reset()
            del attached
        self.result["compile"] = outcome


_USER_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([^\n]+)\n\s*([^\n]*)')


def _compile_failure(exc: BaseException, target_files: list[str]) -> dict[str, Any]:
    """Why dynamo refused, in a line, and the user's line it names ("from user code: ...")."""
    message = str(exc)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    reason = lines[0] if lines else type(exc).__name__
    if len(lines) > 1 and lines[1].lower().startswith("explanation"):
        reason = f"{reason} ({lines[1]})"
    frames = _USER_FRAME.findall(message)
    in_target = [frame for frame in frames if any(frame[0] == path for path in target_files)]
    chosen = (in_target or frames)[-1] if frames else None
    return {
        "error_type": type(exc).__name__,
        "reason": reason[:500],
        "source": (
            {"file": chosen[0], "line": int(chosen[1]), "function": chosen[2], "code": chosen[3]}
            if chosen
            else None
        ),
    }


def _synchronize_quietly() -> None:
    # A sticky error raises here too; the next phase reports it.
    with contextlib.suppress(Exception):
        torch.cuda.synchronize()


def environment(device: torch.device) -> dict[str, Any]:
    properties = torch.cuda.get_device_properties(device)
    return {
        "gpu_name": properties.name,
        "gpu_capability": f"{properties.major}.{properties.minor}",
        "gpu_memory_gib": round(properties.total_memory / 2**30, 1),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": _driver_version(device.index or 0),
        "python": platform.python_version(),
    }


def _driver_version(index: int) -> str | None:
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is not None:
        try:
            completed = subprocess.run(
                [
                    nvidia_smi,
                    "--query-gpu=driver_version",
                    "--format=csv,noheader",
                    "-i",
                    str(index),
                ],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            if completed.returncode == 0 and completed.stdout.strip():
                return completed.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        return None


def run_scenario(spec: ScenarioSpec) -> dict[str, Any]:
    return ScenarioRun(spec).run()
