"""`offlint probe`: the click command (registered by offlint.cli as `offlint probe`).

Importing this module imports neither torch nor libcst: torch is imported when a probe runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console

from offlint.probing.errors import ProbeUsageError

NO_TARGET = (
    "no model to probe: name yours in pyproject.toml, [tool.offlint.probe] entry = "
    '"pkg.module:build" (or --entry pkg.module:build, or a TARGET offloader class); '
    "`offlint probe --demo` runs the bundled fixtures"
)

# click parameter name → options key (the pyproject spelling).
_OPTION_KEYS = {
    "target": "target",
    "entry": "entry",
    "watch": "watch",
    "trace": "trace",
    "gpu": "gpu",
    "layers": "layers",
    "hidden": "hidden",
    "dtype": "dtype",
    "batch_sizes": "batch-sizes",
    "offload_every": "offload-every",
    "prefetch": "prefetch",
    "replays": "replays",
    "warmup_iters": "warmup-iters",
    "timing_iters": "timing-iters",
    "tolerance": "tolerance",
    "max_graph_slowdown": "max-graph-slowdown",
    "min_overlap_speedup": "min-overlap-speedup",
    "timing": "timing",
    "profile": "profile",
    "compile_check": "compile",
    "compiled": "compiled",
    "capture_mode": "capture-mode",
    "scenario": "scenarios",
    "wrap_method": "wrap-method",
    "post_init_method": "post-init-method",
    "prefetch_method": "prefetch-method",
    "wait_method": "wait-method",
    "release_method": "release-method",
    "join_method": "join-method",
    "init_arg": "init-kwargs",
    "timeout": "timeout",
    "seed": "seed",
}


@click.command(
    "probe",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("args", nargs=-1, metavar="[TARGET | -- COMMAND...]")
@click.option(
    "--entry",
    metavar="MODULE:FUNC",
    help="Probe your own model: pkg.module:build or path/file.py:build returns the model with "
    "its offloading installed and make_inputs(batch_size) (docs/probe.md: the --entry protocol); a "
    "bundled example: group-offload, prefetch-offload, sglang-offload; or a real library's "
    "offloading: diffusers-group-offload, accelerate-cpu-offload, sglang-offloader-v2. "
    "--init-arg values go to build().",
)
@click.option(
    "--demo",
    is_flag=True,
    help="Run the bundled fixtures (the broken original and its fixes, each against what it is "
    "expected to do): a demo of the probe, nothing of your project.",
)
@click.option(
    "--sanitize",
    is_flag=True,
    help="Run `-- python script.py ARGS` under the capture sanitizer: stop at the first "
    "stream/event call CUDA graph capture would reject, with both stacks and the rule code.",
)
@click.option(
    "--races",
    is_flag=True,
    help="With --sanitize: also run PyTorch's CUDA sanitizer and stop at the first eager race "
    "between streams (OFL205: wrong numbers, no CUDA error). Costs about 10x on a forward.",
)
@click.option(
    "--gpu",
    default="0",
    show_default=True,
    help="GPU index, or a comma list to run scenarios on several GPUs in parallel.",
)
@click.option("--layers", type=int, default=16, show_default=True, help="Layers of the model.")
@click.option("--hidden", type=int, default=4096, show_default=True, help="Hidden size H.")
@click.option(
    "--dtype", default="bfloat16", show_default=True, help="bfloat16, float16 or float32."
)
@click.option(
    "--batch-sizes",
    default="4096,2048",
    show_default=True,
    help="One graph per batch size (at least two), the first is timed and profiled.",
)
@click.option(
    "--offload-every",
    type=int,
    default=4,
    show_default=True,
    help="Offload the last layer of every N layers.",
)
@click.option(
    "--prefetch", type=int, default=1, show_default=True, help="Offloaded layers loaded ahead."
)
@click.option(
    "--replays",
    type=int,
    default=3,
    show_default=True,
    help="Rounds of interleaved replays of every graph.",
)
@click.option(
    "--warmup-iters", type=int, default=10, show_default=True, help="Untimed calls before timing."
)
@click.option(
    "--timing-iters",
    type=int,
    default=100,
    show_default=True,
    help="Timed calls (the median is reported).",
)
@click.option(
    "--tolerance",
    type=float,
    default=2e-2,
    show_default=True,
    help="Largest relative error that counts as matching the reference.",
)
@click.option(
    "--max-graph-slowdown",
    type=float,
    default=1.1,
    show_default=True,
    help="A graph step may take this many times the eager step.",
)
@click.option(
    "--min-overlap-speedup",
    type=float,
    default=1.6,
    show_default=True,
    help="Bundled run: the overlap fix's graph step must beat the inline fix's by "
    "this much, where the configuration allows it.",
)
@click.option("--timing/--no-timing", default=True, show_default=True, help="Measure times.")
@click.option(
    "--profile/--no-profile",
    default=True,
    show_default=True,
    help="Count H2D copies with torch.profiler.",
)
@click.option(
    "--compile/--no-compile",
    "compile_check",
    default=False,
    show_default=True,
    help="Also check whether the offloaded forward traces with torch.compile(fullgraph=True), "
    "as engines that compile before they capture need (a few seconds per scenario).",
)
@click.option(
    "--compiled",
    type=click.Choice(["fullgraph", "reduce-overhead"]),
    help="Run the life cycle with a compiled forward: fullgraph = torch.compile(fullgraph=True) "
    "captured by hand, reduce-overhead = torch.compile(mode='reduce-overhead') making its own "
    "CUDA graphs. Reports graph breaks (Dynamo's counters) and whether it ran compiled or fell "
    "back. Bundled scenarios are then measured, not judged against their eager expectations.",
)
@click.option(
    "--capture-mode",
    metavar="MODE",
    help="How the graph runner captures the forward (several, comma-separated: one run each): "
    "whole (one torch.cuda.graph, the default), pieces (two graphs split at the middle layer, as piecewise runners), "
    "segmented-sglang or segmented-vllm (two segments with the middle layer run eagerly between "
    "them; SGLang joins wait_stream forks at each segment end, vLLM joins nothing). "
    "docs/probe-capture-modes.md says what is emulated.",
)
@click.option(
    "--watch/--no-watch",
    default=True,
    show_default=True,
    help="Watch the stream and event calls of the life cycle, so a failed capture names the "
    "call that caused it and its rule code.",
)
@click.option(
    "--trace",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the profiler traces (Chrome/Perfetto JSON, one per scenario and step kind) in "
    "this folder.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Draw one graph replay per scenario (compute and H2D copies per stream) as a PNG "
    "(needs matplotlib: offlint[plot]). With --from-trace, from traces kept earlier, no GPU.",
)
@click.option(
    "--from-trace",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --plot: plot from the traces a run kept with --trace DIR (on any machine); "
    "nothing is run.",
)
@click.option(
    "--scenario",
    multiple=True,
    help="Bundled scenario to run (repeatable): original, inline, inline-fixed, "
    "overlap. Default: all.",
)
@click.option("--wrap-method", help="TARGET's method taking the layers (default wrap_modules).")
@click.option("--post-init-method", help="TARGET's post-init method (default post_init).")
@click.option("--prefetch-method", help="Module offloader's prefetch (default start_onload).")
@click.option(
    "--wait-method", help="Module offloader's wait (default wait_and_get_device_tensors)."
)
@click.option("--release-method", help="Module offloader's release (default offload).")
@click.option(
    "--join-method",
    help="Module offloader's end-of-forward join, called on every offloader after each forward "
    "(default join_pending_copies, what `offlint fix` writes when no class owns the modules).",
)
@click.option(
    "--init-arg",
    multiple=True,
    metavar="NAME=VALUE",
    help="Extra constructor argument for TARGET (VALUE as JSON, else a string).",
)
@click.option(
    "--timeout", type=float, default=900.0, show_default=True, help="Seconds one scenario may take."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option(
    "--output-format",
    type=click.Choice(["text", "json"]),
    help="text (tables) or json. Default: json when --output-file ends in .json, else text.",
)
@click.option(
    "-o",
    "--output-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report here instead of stdout.",
)
@click.option("--json", "as_json", is_flag=True, hidden=True, help="= --output-format json.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    hidden=True,
    help="Old spelling: also write the run as JSON to this file (tables stay on stdout).",
)
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="pyproject.toml to read [tool.offlint.probe] from (default: the nearest).",
)
@click.pass_context
def probe_command(
    ctx: click.Context,
    args: tuple[str, ...],
    sanitize: bool,
    races: bool,
    output_format: str | None,
    output_file: Path | None,
    as_json: bool,
    output: Path | None,
    demo: bool,
    config: Path | None,
    plot: Path | None,
    from_trace: Path | None,
    **values: Any,
) -> None:
    """Drive an offloader through a decode graph runner's life on a GPU and report numbers.

    TARGET is path/to/file.py[:Class] or package.module[:Class], an offloader in the
    prefetch/wait shape, attached to the probe's own layer stack. --entry MODULE:FUNC probes
    your own model with your own offloading instead; without either on the command line, the
    `entry` (or `target`) of [tool.offlint.probe] in pyproject.toml is probed, and with none
    named anywhere the run fails (exit 2) saying how to name one. --demo (or --scenario NAME)
    runs the bundled fixtures (the broken original, the merged inline fix, the smallest correct
    inline fix and the overlap fix), each against what it is expected to do. --sanitize --
    python script.py ARGS runs any program under the capture sanitizer.

    Exit status: 0 every check passed (bundled: every scenario did what it is expected to do;
    --sanitize: no violation), 1 a check failed (a violation), 2 no usable GPU, a bad TARGET,
    a setup error in it (import, environment, constructor) or bad options.
    """
    stderr = Console(stderr=True, highlight=False)
    fmt = "json" if as_json else output_format
    if fmt is None:
        fmt = "json" if output_file is not None and output_file.suffix == ".json" else "text"
    try:
        if from_trace is not None:
            if plot is None:
                raise ProbeUsageError("--from-trace goes with --plot FILE")
            sys.exit(_plot_offline(from_trace, plot))
        if plot is not None:
            from offlint.probing.plot import check_matplotlib

            check_matplotlib()  # before minutes of GPU work, not after
        if races and not sanitize:
            raise ProbeUsageError("--races goes with --sanitize -- python script.py ARGS")
        if sanitize:
            from offlint.probing.sanitize_command import run_sanitized

            status, document = run_sanitized(list(args), values.get("timeout"), races=races)
            _emit_sanitized(document, fmt, output_file)
            sys.exit(status)
        if len(args) > 1:
            raise ProbeUsageError(
                f"one TARGET expected, got {len(args)} arguments (a command to run goes after "
                "--sanitize --)"
            )
        values["target"] = args[0] if args else None
        options = _resolve_options(ctx, config, values)
        named = options.target is not None or options.entry is not None
        if demo and named:
            raise ProbeUsageError("--demo runs the bundled fixtures: give it without TARGET or --entry")
        if not (named or demo or options.scenarios):
            # a CI job that runs `offlint probe --gpu 0` must test the project's model, never
            # go green on the bundled fixtures
            raise ProbeUsageError(NO_TARGET)
        if plot is not None and options.trace_dir is None:
            import dataclasses

            options = dataclasses.replace(options, trace_dir=str(_scratch_trace_dir()))
        from offlint.probing.runner import probe

        def progress(line: str) -> None:
            stderr.print(line, style="dim", markup=False)

        if options.capture_modes:
            # one run per capture mode asked for, each a whole probe of its own
            import dataclasses

            documents = []
            for mode in options.capture_modes:
                progress(f"capture mode {mode}")
                documents.append(probe(dataclasses.replace(options, capture_mode=mode, capture_modes=()), progress=progress))
            sys.exit(_emit_modes(options.capture_modes, documents, fmt, output_file))
        document = probe(options, progress=progress)
    except ProbeUsageError as exc:
        click.echo(f"offlint probe: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    from offlint.probing.report import render_console, render_json, summary_line

    if plot is not None:
        trace_dir = Path(document["options"].get("trace_dir") or "")
        try:
            _plot_offline(trace_dir, plot, quiet=True)
        except ProbeUsageError as exc:
            click.echo(f"offlint probe: --plot: {exc}", err=True)

    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(render_json(document) + "\n", encoding="utf-8")
    if output_file is not None:
        output_file.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "json":
            output_file.write_text(render_json(document) + "\n", encoding="utf-8")
        else:
            with output_file.open("w", encoding="utf-8") as stream:
                render_console(document, Console(file=stream, width=160, no_color=True))
        click.echo(summary_line(document), err=True)
    elif fmt == "json":
        click.echo(render_json(document))
    else:
        console = Console(highlight=False)
        if not console.is_terminal:
            # Logs (CI, a GPU machine's output) have no width; the tables need about 150.
            console = Console(highlight=False, width=160)
        render_console(document, console)
    sys.exit(document["exit_code"])


def _emit_modes(modes: tuple[str, ...], documents: list[dict[str, Any]], fmt: str, output_file: Path | None) -> int:
    """The runs of several capture modes: one JSON document holding each run's (schema
    `offlint-probe-modes/1`), or each run's tables under its mode; the worst exit status."""
    from offlint.probing.report import render_console, render_json, summary_line

    status = max(document["exit_code"] for document in documents)
    if fmt == "json":
        combined = {
            "schema": "offlint-probe-modes/1",
            "capture_modes": list(modes),
            "runs": documents,
            "exit_code": status,
        }
        text = render_json(combined)
        if output_file is None:
            click.echo(text)
        else:
            output_file.parent.mkdir(parents=True, exist_ok=True)
            output_file.write_text(text + "\n", encoding="utf-8")
    else:
        stream = output_file.open("w", encoding="utf-8") if output_file is not None else None
        try:
            console = Console(file=stream, width=160, no_color=stream is not None, highlight=False)
            for mode, document in zip(modes, documents, strict=True):
                console.print(f"capture mode: {mode}")
                render_console(document, console)
        finally:
            if stream is not None:
                stream.close()
    for mode, document in zip(modes, documents, strict=True):
        click.echo(f"{mode}: {summary_line(document)}", err=True)
    return int(status)


def _scratch_trace_dir() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="offlint-probe-trace-"))


def _plot_offline(trace_dir: Path, plot: Path, quiet: bool = False) -> int:
    """Plot the replay traces of `trace_dir` into `plot`; a line per scenario on stderr."""
    from offlint.probing.plot import load_timelines, plot_timelines

    stats = plot_timelines(load_timelines(trace_dir), plot)
    for scenario, numbers in stats.items():
        click.echo(
            f"{scenario}: replay {numbers['replay_ms']:.2f} ms, H2D {numbers['h2d_ms']:.2f} ms "
            f"({numbers['h2d_copies']:g} copies), {100 * numbers['h2d_overlap_share']:.0f}% "
            "overlapping compute",
            err=True,
        )
    click.echo(f"offlint probe: timeline written to {plot}", err=True)
    return 0


def _emit_sanitized(document: dict[str, Any], fmt: str, output_file: Path | None) -> None:
    import json

    from offlint.probing.sanitize_command import render_sanitized

    text = json.dumps(document, indent=2) if fmt == "json" else render_sanitized(document)
    if output_file is not None:
        output_file.parent.mkdir(parents=True, exist_ok=True)
        output_file.write_text(text + "\n", encoding="utf-8")
    else:
        click.echo(text)


def _resolve_options(ctx: click.Context, config: Path | None, values: dict[str, Any]) -> Any:
    from offlint.probing.options import (
        build_options,
        find_pyproject,
        parse_init_args,
        read_pyproject_settings,
    )

    pyproject_path = config or find_pyproject(Path.cwd())
    pyproject = read_pyproject_settings(pyproject_path) if pyproject_path else {}
    given: dict[str, Any] = {}
    for name, value in values.items():
        if name == "target":
            if value is not None:
                given["target"] = value
            continue
        if ctx.get_parameter_source(name) in (ParameterSource.DEFAULT, None):
            continue
        if name == "init_arg":
            try:
                value = parse_init_args(value)
            except ValueError as exc:
                raise ProbeUsageError(f"--init-arg: {exc}") from None
        if name == "scenario":
            value = list(value)
        if name == "trace":
            value = str(value.resolve())
        given[_OPTION_KEYS[name]] = value
    return build_options(given, pyproject)
