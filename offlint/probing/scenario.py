"""One scenario: the life a decode graph runner gives an offloader, on one GPU, in one process.

Phases, in order (each recorded; a failing phase records its error and ends the ones that
depend on it):

1. baseline   the all-on-GPU model captured and replayed per batch size (the compute time) and
              the pinned H2D bandwidth (timing only);
2. attach     construct the TARGET, wrap the layers, post-init prefetch;
3. eager      an eager forward per batch size (the warm-up), each checked;
4. eager timing and the H2D copies of one eager step (side-stream overlap, no graph);
5. capture    per batch size, largest first: two eager warm-up forwards (as SGLang's graph runner
              does), then a capture into a memory pool shared by all graphs: one
              `torch.cuda.graph` of the forward, or with `--capture-mode` two pieces or two
              segments around an eager break (capture_modes.py), replayed in order;
6. eager after capture: one eager forward right after the last capture, before any replay;
7. replays    of every graph, interleaved, each on a fresh input;
8. weight update: an in-place write into an offloaded layer's host weight, then a replay of each
              graph (a graph re-reads the host address at every replay);
9. graph timing and the H2D copies per replay;
With `--compiled fullgraph` the forward after the eager warm-up is `torch.compile(model,
fullgraph=True)` (inductor), compiled in a phase of its own ("compiled"), and every later phase
uses it: captured by hand as an engine captures a compiled forward; if it cannot compile, the
life cycle goes on eagerly (an engine falling back) and says so. With `--compiled
reduce-overhead` the compiled forward makes its own CUDA graphs (CUDA graph trees): "capture" is
its warm-up/record/replay calls per batch size, replays and graph timing are calls of it, and
"eager after capture" is an uncompiled forward. Graph breaks, compiled graphs and skipped CUDA
graphs are read from Dynamo's and Inductor's own counters (`torch._dynamo.utils.counters`),
not from `explain`. The sanitizer does not watch a compiled life cycle (Dynamo would trace its
wrappers).

10. compile   (opt-in) whether the hooked forward of a freshly attached model traces with
              `torch.compile(fullgraph=True)` (the "eager" backend: tracing is the question, not
              code generation).

Every check compares with the reference on the same input (subject.py: the all-on-GPU stack,
or an `--entry`'s own reference). While it runs, the capture sanitizer watches in "record" mode
(paused while timing): a capture CUDA fails only at its end (900 at 901's root, with no line)
is reported with the call that caused it. Results are measurements only; the parent process
judges them (checks.py).
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
from pathlib import Path
from typing import Any

import torch

from offlint.probing.capture_modes import SplitGraph, capture_split, layer_list
from offlint.probing.cuda_errors import describe_exception
from offlint.probing.errors import ProbeUsageError, one_line
from offlint.probing.sanitizer import CaptureSanitizer
from offlint.probing.spec import ScenarioSpec
from offlint.probing.subject import (
    EntrySubject,
    SyntheticSubject,
    call,
    copy_into,
    output_error,
)
from offlint.probing.timing import count_h2d_copies, h2d_bandwidth, median_ms

# Copies are counted over this many calls (and divided), so one stray copy cannot hide.
_PROFILED_CALLS = 3
# SGLang's graph runner runs each batch size twice eagerly before capturing it.
_WARMUPS_BEFORE_CAPTURE = 2


# The all-on-GPU baseline of a configuration, measured once per worker process: scenarios that
# share a process and a configuration share it (the bundled run's four do).
_BASELINES: dict[tuple[Any, ...], dict[str, Any]] = {}


class _PhaseFailed(Exception):
    """A phase could not complete; its error is already recorded."""


class _Watch:
    """The sanitizer in record mode, or nothing (`--no-watch`, or a failed install)."""

    def __init__(self, enabled: bool) -> None:
        self.sanitizer: CaptureSanitizer | None = None
        if enabled:
            sanitizer = CaptureSanitizer(mode="record")
            try:
                sanitizer.install()
            except Exception:
                sanitizer.uninstall()
            else:
                self.sanitizer = sanitizer

    def paused(self) -> Any:
        return self.sanitizer.paused() if self.sanitizer else contextlib.nullcontext()

    def since(self, count: int) -> list[dict[str, Any]]:
        if self.sanitizer is None:
            return []
        return [v.to_json() for v in self.sanitizer.violations[count:]]

    @property
    def seen(self) -> int:
        return len(self.sanitizer.violations) if self.sanitizer else 0

    def close(self) -> None:
        if self.sanitizer is not None:
            self.sanitizer.uninstall()


class ScenarioRun:
    def __init__(self, spec: ScenarioSpec, device: torch.device | None = None):
        self.spec = spec
        self.config = spec.model
        # `device` is for tests that dry-run the life cycle on the CPU with torch.cuda faked.
        self.device = device or torch.device("cuda", spec.device_index)
        self.subject: SyntheticSubject | EntrySubject | None = None
        self.batch_sizes: tuple[int, ...] = spec.model.batch_sizes
        # batch size -> (a CUDAGraph, or a SplitGraph under --capture-mode, static in, out)
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph | SplitGraph, Any, Any]] = {}
        self.captured_any = False
        self.watch: _Watch | None = None
        # `--compiled`: the compiled forward once it compiled (None: eager, or it fell back).
        self.compiled: Callable[..., Any] | None = None
        self.result: dict[str, Any] = {
            "scenario": spec.name,
            "target": spec.target,
            "capture_mode": spec.capture_mode,
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
        if spec.entry:
            self.result["entry"] = True

    # --- bookkeeping -----------------------------------------------------------------------

    @property
    def target_files(self) -> list[str]:
        return self.subject.target_files if self.subject is not None else []

    def _phase(self, name: str, body: Callable[[], None]) -> bool:
        started = time.perf_counter()
        _announce(name)
        seen = self.watch.seen if self.watch else 0
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
            if self.watch is not None:
                for violation in self.watch.since(seen):
                    self.result.setdefault("hazards", []).append({"phase": name, **violation})
        self.result["phases"][name] = "ok"
        return True

    def _skip(self, name: str, why: str) -> None:
        self.result["phases"][name] = f"skipped: {why}"

    def _record_error(self, phase: str, exc: BaseException) -> None:
        entry = {"phase": phase, **describe_exception(exc, self.target_files)}
        entry["traceback"] = "".join(traceback.format_exception(exc))[-6000:]
        if phase in ("setup", "attach"):
            # The target never ran its life cycle: a setup error, one line (exit 2).
            entry["setup_error"] = str(exc) if isinstance(exc, ProbeUsageError) else one_line(exc)
        self.result["phase_errors"].append(entry)
        _synchronize_quietly()

    def _input(self, batch: int) -> Any:
        assert self.subject is not None
        return self.subject.make_input(batch)

    @property
    def _graphs_itself(self) -> bool:
        """The compiled forward makes its own CUDA graphs (mode="reduce-overhead")."""
        return self.compiled is not None and self.spec.compiled == "reduce-overhead"

    def _forward(self, inputs: Any) -> Any:
        """The forward an engine runs outside its graphs (and captures): the fullgraph-compiled
        one under `--compiled fullgraph`, else the model as attached."""
        assert self.subject is not None
        if self.compiled is not None and not self._graphs_itself:
            return call(self.compiled, inputs)
        return call(self.subject.model, inputs)

    def _check(self, phase: str, batch: int, output: Any, inputs: Any, note: str) -> None:
        assert self.subject is not None
        rel, exact = output_error(output, self.subject.expected(inputs))
        self.result["steps"].append(
            {"phase": phase, "batch": batch, "rel_err": rel, "exact": exact, "note": note}
        )

    def _eager_step(self, batch: int, note: str) -> None:
        phase = "eager_after_capture" if self.captured_any else "eager"
        x = self._input(batch)
        output = self._forward(x)
        self._check(phase, batch, output, x, note)

    def _replay_step(self, phase: str, batch: int, note: str) -> None:
        if self._graphs_itself:
            assert self.compiled is not None
            x = self._input(batch)
            self._check(phase, batch, call(self.compiled, x), x, f"{note} (compiled call)")
            return
        graph, static_x, static_out = self.graphs[batch]
        x = self._input(batch)
        copy_into(static_x, x)
        graph.replay()
        self._check(phase, batch, static_out, x, note)

    # --- phases ----------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        self.watch = _Watch(self.spec.watch and not self.spec.compiled)
        try:
            with torch.no_grad():
                self._run_phases()
        finally:
            self.watch.close()
            if self.spec.compiled:
                self._compiled_summary()
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
        if spec.compiled and not self._phase("compiled", self._compile_forward):
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
            self._skip("compile", "compile check off (--compile)")

    def _setup(self) -> None:
        torch.cuda.set_device(self.device)
        self.result["environment"] = environment(self.device)
        subject_type = EntrySubject if self.spec.entry else SyntheticSubject
        self.subject = subject_type(self.spec, self.device)
        self.batch_sizes = tuple(self.subject.batch_sizes or self.config.batch_sizes)
        self.result["model"]["batch_sizes"] = list(self.batch_sizes)
        if self.spec.entry:
            self.result["model"] = {"batch_sizes": list(self.batch_sizes), "entry": True}
        self.result["target_class"] = self.subject.label
        self.result["target_shape"] = self.subject.shape
        self.result["target_file"] = self.subject.source_file

    def _baseline(self) -> None:
        """The reference captured per batch size (the compute floor), and the H2D bandwidth.
        Measured once per process and configuration (scenarios sharing a worker share it)."""
        subject = self.subject
        assert subject is not None
        key = (
            self.spec.target if self.spec.entry else None,
            self.config,
            self.batch_sizes,
            self.spec.seed,
            self.device,
            self.spec.warmup_iters,
            self.spec.timing_iters,
        )
        timing = self.result["timing"]
        cached = _BASELINES.get(key)
        if cached is not None:
            timing["reference_graph"] = dict(cached["reference_graph"])
            timing["h2d"] = dict(cached["h2d"]) if cached["h2d"] else None
            self.result["baseline_shared"] = True
            return
        with self.watch.paused() if self.watch else contextlib.nullcontext():
            timing["h2d"] = h2d_bandwidth(
                subject.probe_bytes(), self.device, self.spec.warmup_iters, self.spec.timing_iters
            )
            reference = subject.reference
            if reference is not None:
                pool = torch.cuda.graph_pool_handle()
                # Every graph of a shared pool stays alive until the last is captured:
                # releasing one can release the pool under the next capture.
                graphs = []
                for batch in self.batch_sizes:
                    static_x = self._input(batch)
                    for _ in range(_WARMUPS_BEFORE_CAPTURE):
                        call(reference, static_x)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph, pool=pool):
                        call(reference, static_x)
                    graphs.append(graph)
                    timing["reference_graph"][str(batch)] = median_ms(
                        graph.replay, self.spec.warmup_iters, self.spec.timing_iters
                    )
                torch.cuda.synchronize()
                del graphs
                torch.cuda.empty_cache()
        _BASELINES[key] = {
            "reference_graph": dict(timing["reference_graph"]),
            "h2d": dict(timing["h2d"]) if timing["h2d"] else None,
        }

    def _attach(self) -> None:
        assert self.subject is not None
        self.subject.attach()
        self.result["constructor"] = self.subject.constructor
        self.result["host_weights"] = self.subject.host_weights()
        if self.subject.expected_copies is not None:
            self.result["expected_copies"] = int(self.subject.expected_copies)
        if self.spec.capture_mode != "whole":
            # A model the split cannot apply to is a setup error (exit 2), found before capture.
            layers = layer_list(self.subject.model)
            self.result["split_at_layer"] = len(layers) // 2

    def _eager(self) -> None:
        for batch in self.batch_sizes:
            self._eager_step(batch, "first eager forward (warm-up)")

    def _eager_timing(self) -> None:
        heavy = self.batch_sizes[0]
        forward = self._forward
        with self.watch.paused() if self.watch else contextlib.nullcontext():
            if self.spec.timing:
                timing = self.result["timing"]
                for batch in self.batch_sizes:
                    x = self._input(batch)

                    def step(x: Any = x) -> Any:
                        return forward(x)

                    timing["eager"][str(batch)] = median_ms(
                        step, self.spec.warmup_iters, self.spec.timing_iters
                    )
            if self.spec.profile:
                x = self._input(heavy)
                h2d = self.result["h2d"]
                h2d["per_eager_step"][str(heavy)] = count_h2d_copies(
                    lambda: forward(x), _PROFILED_CALLS, self._trace_path(f"eager-{heavy}")
                )
        # The timed forwards were eager too: check the model is still exact after them.
        self._eager_step(heavy, "eager forward after the timed eager steps")

    def _trace_path(self, what: str) -> str | None:
        if not self.spec.trace_dir:
            return None
        name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{self.spec.name}-{what}")
        return str(Path(self.spec.trace_dir) / f"{name}.json")

    def _capture(self) -> None:
        if self._graphs_itself:
            self._capture_compiled()
            return
        pool = torch.cuda.graph_pool_handle()
        capture: dict[str, Any] = {
            "ok": False,
            "graphs": [],
            "error": None,
            "mode": self.spec.capture_mode,
        }
        self.result["capture"] = capture
        for batch in self.batch_sizes:
            for round_index in range(_WARMUPS_BEFORE_CAPTURE):
                self._eager_step(
                    batch, f"graph-runner warm-up {round_index + 1} before capturing batch {batch}"
                )
            static_x = self._input(batch)
            seen = self.watch.seen if self.watch else 0
            try:
                graph, static_out = self._capture_one(static_x, pool)
            except Exception as exc:
                self.captured_any = True
                capture["graphs"].append({"batch": batch, "ok": False})
                capture["error"] = {"batch": batch, **describe_exception(exc, self.target_files)}
                capture["error"]["traceback"] = "".join(traceback.format_exception(exc))[-6000:]
                hazards = self.watch.since(seen) if self.watch else []
                if hazards:
                    # What the sanitizer saw first in this capture: the call CUDA objected to.
                    capture["error"]["hazard"] = hazards[0]
                _synchronize_quietly()
                raise _PhaseFailed from None
            self.captured_any = True
            made: dict[str, Any] = {"batch": batch, "ok": True}
            if isinstance(graph, SplitGraph):
                made.update(graph.describe())
            capture["graphs"].append(made)
            self.graphs[batch] = (graph, static_x, static_out)
        capture["ok"] = True

    def _capture_one(self, static_x: Any, pool: Any) -> tuple[Any, Any]:
        """One batch size's graph as the `--capture-mode` runner captures it: a CUDAGraph of
        the whole forward, or a SplitGraph of its pieces or segments (capture_modes.py)."""
        mode = self.spec.capture_mode
        if mode == "whole":
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                static_out = self._forward(static_x)
            return graph, static_out
        assert self.subject is not None
        return capture_split(
            mode, lambda: self._forward(static_x), layer_list(self.subject.model), pool
        )

    def _eager_after_capture(self) -> None:
        if self._graphs_itself:
            # The engine's path outside its CUDA graphs: the uncompiled forward.
            assert self.subject is not None
            batch = self.batch_sizes[0]
            x = self._input(batch)
            self._check(
                "eager_after_capture",
                batch,
                call(self.subject.model, x),
                x,
                "first uncompiled forward after the compiled forward's graphs were recorded",
            )
            return
        self._eager_step(
            self.batch_sizes[0], "first eager forward after the last capture, before any replay"
        )

    def _replays(self) -> None:
        for round_index in range(self.spec.replay_rounds):
            for batch in self.batch_sizes:
                self._replay_step("replay", batch, f"replay round {round_index + 1}")

    def _weight_update(self) -> None:
        assert self.subject is not None
        update = self.subject.update_weights()
        self.result["weight_update"] = update
        if not update.get("applied"):
            return
        where = f"layer {update['layer']}'s" if "layer" in update else "the"
        for batch in self.batch_sizes:
            self._replay_step(
                "replay_after_update", batch, f"replay after updating {where} host weight"
            )

    def _graph_timing(self) -> None:
        timing = self.result["timing"]
        h2d = self.result["h2d"]
        if self._graphs_itself:
            self._graph_timing_compiled()
            return
        with self.watch.paused() if self.watch else contextlib.nullcontext():
            for batch, (graph, _, _) in self.graphs.items():
                if self.spec.timing:
                    timing["graph"][str(batch)] = median_ms(
                        graph.replay, self.spec.warmup_iters, self.spec.timing_iters
                    )
                if self.spec.profile:
                    h2d["per_replay"][str(batch)] = count_h2d_copies(
                        graph.replay, _PROFILED_CALLS, self._trace_path(f"replay-{batch}")
                    )

    # --- the compiled life cycle (`--compiled`) -----------------------------------------------

    def _compile_forward(self) -> None:
        """Compile the attached model's forward and run it once (the compilation); on failure
        the life cycle goes on with the eager forward, as an engine falling back does."""
        assert self.subject is not None
        import torch._dynamo
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        mode = self.spec.compiled
        options: dict[str, Any] = (
            {"fullgraph": True} if mode == "fullgraph" else {"mode": "reduce-overhead"}
        )
        info: dict[str, Any] = {"mode": mode, "backend": "inductor", "options": options}
        self.result["compiled"] = info
        compiled = torch.compile(self.subject.model, **options)
        batch = self.batch_sizes[0]
        x = self._input(batch)
        started = time.perf_counter()
        try:
            output = call(compiled, x)
            torch.cuda.synchronize()
        except Exception as exc:
            info["error"] = _compile_failure(exc, self.target_files)
            info["fell_back"] = True
            _synchronize_quietly()
            return
        info["first_call_s"] = round(time.perf_counter() - started, 3)
        info["fell_back"] = False
        self._check("compiled", batch, output, x, "first compiled forward (compiles)")
        self.compiled = compiled

    def _capture_compiled(self) -> None:
        """mode="reduce-overhead": per batch size, the calls CUDA graph trees need to warm up,
        record and replay a graph, each checked."""
        assert self.compiled is not None
        capture: dict[str, Any] = {
            "ok": False,
            "graphs": [],
            "error": None,
            "by": "torch.compile(mode='reduce-overhead'): CUDA graph trees",
        }
        self.result["capture"] = capture
        for batch in self.batch_sizes:
            for index, what in enumerate(("warm-up", "record", "first replay")):
                x = self._input(batch)
                try:
                    output = call(self.compiled, x)
                except Exception as exc:
                    self.captured_any = True
                    capture["graphs"].append({"batch": batch, "ok": False})
                    capture["error"] = {
                        "batch": batch,
                        **describe_exception(exc, self.target_files),
                    }
                    capture["error"]["traceback"] = "".join(traceback.format_exception(exc))[-6000:]
                    _synchronize_quietly()
                    raise _PhaseFailed from None
                self._check(
                    "capture",
                    batch,
                    output,
                    x,
                    f"compiled call {index + 1} ({what}), batch {batch}",
                )
            capture["graphs"].append({"batch": batch, "ok": True})
        self.captured_any = True
        capture["ok"] = True

    def _graph_timing_compiled(self) -> None:
        assert self.compiled is not None
        compiled = self.compiled
        timing = self.result["timing"]
        h2d = self.result["h2d"]
        for batch in self.batch_sizes:
            x = self._input(batch)

            def step(x: Any = x) -> Any:
                return call(compiled, x)

            if self.spec.timing:
                timing["graph"][str(batch)] = median_ms(
                    step, self.spec.warmup_iters, self.spec.timing_iters
                )
            if self.spec.profile:
                h2d["per_replay"][str(batch)] = count_h2d_copies(
                    step, _PROFILED_CALLS, self._trace_path(f"replay-{batch}")
                )

    def _compiled_summary(self) -> None:
        """Dynamo's and Inductor's own counts: graph breaks (with their reasons), graphs
        compiled, frames, CUDA graphs skipped; and, in a line, how the forward ran."""
        info = self.result.get("compiled")
        if info is None:
            return
        with contextlib.suppress(Exception):
            from torch._dynamo.utils import counters as dynamo_counters

            counters: dict[str, Any] = dict(dynamo_counters)
            breaks = dict(counters.get("graph_break", {}))
            info["graph_breaks"] = int(sum(breaks.values()))
            ranked = sorted(breaks.items(), key=lambda item: -item[1])[:5]
            info["break_reasons"] = {str(reason)[:300]: int(n) for reason, n in ranked}
            stats: dict[str, Any] = dict(counters.get("stats", {}))
            info["unique_graphs"] = int(stats.get("unique_graphs", 0))
            info["calls_captured"] = int(stats.get("calls_captured", 0))
            info["frames"] = {k: int(v) for k, v in counters.get("frames", {}).items()}
            info["cudagraph_skips"] = int(counters.get("inductor", {}).get("cudagraph_skips", 0))
        info["ran"] = compiled_verdict(info)

    def _compile_check(self) -> None:
        """A fresh model and offloader (the life cycle's may be mid-failure): does the hooked
        forward trace as one graph? The sanitizer's patches are lifted first (dynamo would
        trace into them)."""
        assert self.subject is not None
        if self.watch is not None:
            self.watch.close()
        model, keep_alive = self.subject.fresh()
        batch = self.batch_sizes[-1]
        x = self._input(batch)
        call(model, x)  # one eager forward first, as an engine warms up before compiling
        import torch._dynamo

        torch._dynamo.reset()
        outcome: dict[str, Any] = {"backend": "eager", "fullgraph": True}
        try:
            output = call(torch.compile(model, fullgraph=True, backend="eager"), x)
        except Exception as exc:
            outcome.update(_compile_failure(exc, self.target_files))
            outcome["ok"] = False
        else:
            outcome["ok"] = True
            outcome["rel_err"] = output_error(output, self.subject.expected(x))[0]
        finally:
            torch._dynamo.reset()
            del keep_alive
        self.result["compile"] = outcome


def compiled_verdict(info: dict[str, Any]) -> str:
    """How the forward ran under `--compiled`, in words."""
    if info.get("fell_back"):
        return "fell back to eager: the forward did not compile"
    breaks = info.get("graph_breaks")
    graphs = info.get("unique_graphs")
    if graphs == 0:
        return "fell back to eager: Dynamo compiled no graph"
    text = (
        "compiled as one graph per shape"
        if breaks == 0
        else f"partly compiled: {breaks} graph break(s), {graphs} graph(s); the code between "
        "them ran eagerly"
    )
    if info.get("mode") == "reduce-overhead":
        skips = info.get("cudagraph_skips") or 0
        text += (
            f"; CUDA graphs skipped {skips} time(s): those graphs ran without CUDA graphs"
            if skips
            else "; CUDA graph trees used"
        )
    return text


def _announce(phase: str) -> None:
    """Tell a parent reading the protocol channel which phase runs (worker.py)."""
    from offlint.probing import protocol

    protocol.announce_phase(phase)


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
