"""A graph runner's life cycle on one adapter variant, as shared/GROUND-TRUTH.md §3 measured it:
eager forwards against a GPU copy, then one capture with `torch.cuda.graph`, under the capture
sanitizer in record mode; the root error and the innermost line inside the library, from the
exception and from each violation. `--csan` runs one eager forward under PyTorch's CUDA
sanitizer instead, for a wrong eager result (a race has no error to walk).

Each variant runs in a process of its own: a failed capture can leave the CUDA context (and
PyTorch's shared capture stream) unusable, and the CUDA sanitizer, once enabled, stays on.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from offlint.probing.adapters._library import (
    LibraryMissing,
    import_library,
    line_in_traceback,
    lines_in_frames,
    lines_in_summary,
    package_dir,
)
from offlint.probing.errors import one_line

EAGER_FORWARDS = 3
BATCH = 64  # GROUND-TRUTH §3's batch
CHILD_TIMEOUT_S = 150


@dataclass(frozen=True)
class Adapter:
    module: str  # this adapter's module, run as `python -m` for each variant
    distribution: str  # what `pip install` takes
    library: str  # the package whose lines are named (`diffusers`, `accelerate`)
    variants: dict[str, str]  # name → the set-up, in words
    build: Callable[..., Any]


def _library_dir(adapter: Adapter) -> str:
    return package_dir(import_library(adapter.library, adapter.distribution))


def _eager(probed: Any, torch: Any) -> list[dict[str, Any]]:
    from offlint.probing.subject import call, output_error

    steps = []
    for index in range(EAGER_FORWARDS):
        inputs = probed.make_inputs(BATCH)
        with torch.no_grad():
            out = call(probed.model, inputs)
            want = call(probed.reference, inputs)
        torch.cuda.synchronize()
        rel_err, exact = output_error(out, want)
        steps.append({"forward": index + 1, "rel_err": round(rel_err, 4), "exact": exact})
    return steps


def _capture(probed: Any, torch: Any, directory: str) -> dict[str, Any]:
    from offlint.probing.cuda_errors import describe_exception, exception_chain
    from offlint.probing.subject import call, output_error

    static_in = probed.make_inputs(BATCH)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()  # not PyTorch's shared capture stream
    try:
        with torch.no_grad(), torch.cuda.graph(graph, stream=stream):
            static_out = call(probed.model, static_in)
    except Exception as exc:  # the capture's failure is the result
        described = describe_exception(exc, [])
        # root first: the surface is often PyTorch's 901 from the capture's end, with no line
        lines = [line_in_traceback(link, directory) for link in reversed(exception_chain(exc))]
        named = [asdict(line) for line in lines if line is not None]
        return {"ok": False, **described, "library_lines": named}
    fresh = probed.make_inputs(BATCH)
    static_in.copy_(fresh)
    graph.replay()
    with torch.no_grad():
        want = call(probed.reference, fresh)
    torch.cuda.synchronize()
    rel_err, exact = output_error(static_out, want)
    return {"ok": True, "replay": {"rel_err": round(rel_err, 4), "exact": exact}}


def _csan(probed: Any, torch: Any, directory: str) -> dict[str, Any]:
    """One eager forward under PyTorch's CUDA sanitizer: the first unordered access pair."""
    from torch.cuda import _sanitizer as csan

    from offlint.probing.subject import call

    csan.enable_cuda_sanitizer()
    inputs = probed.make_inputs(BATCH)
    try:
        with torch.no_grad():
            call(probed.model, inputs)
        torch.cuda.synchronize()
    except csan.CUDASanitizerErrors as errors:
        races = []
        for error in errors.errors:
            if not isinstance(error, csan.UnsynchronizedAccessError):
                continue
            races.append(
                {
                    side: {
                        "access": str(access.type),
                        "operator": str(access.operator).split("(")[0],
                        "stream": access.stream,
                        "argument": ", ".join(access.aliases),
                        "library_lines": [
                            asdict(line) for line in lines_in_summary(access.stack_trace, directory)
                        ][:3],
                    }
                    for side, access in (
                        ("current", error.current_access),
                        ("previous", error.previous_access),
                    )
                }
            )
        return {"races": races}
    finally:
        csan.cuda_sanitizer.disable()
    return {"races": []}


def run_one(adapter: Adapter, variant: str, csan: bool) -> dict[str, Any]:
    """One variant in this process (the child side of `main`)."""
    import torch

    from offlint.probing.sanitizer import capture_sanitizer

    directory = _library_dir(adapter)
    torch.manual_seed(0)
    probed = adapter.build(variant=variant)
    result: dict[str, Any] = {"variant": variant, "setup": adapter.variants[variant]}
    if csan:
        result["csan"] = _csan(probed, torch, directory)
        return result
    with capture_sanitizer(mode="record") as sanitizer:
        result["eager"] = _eager(probed, torch)
        result["capture"] = _capture(probed, torch, directory)
    result["sanitizer"] = [
        {
            "rule": violation.rule,
            "name": violation.name,
            "what": violation.what,
            "prevents": violation.prevents,
            "library_lines": [asdict(line) for line in lines_in_frames(violation.here, directory)][
                :3
            ],
            "report_here": violation.to_json()["here"][:2],
        }
        for violation in sanitizer.violations
    ]
    return result


def summary(result: dict[str, Any]) -> str:
    """One line per variant: eager error, capture outcome, the named library line(s)."""
    name = result["variant"]
    if "error" in result:
        return f"{name}: could not run: {result['error']}"
    if "csan" in result:
        races = result["csan"]["races"]
        if not races:
            return f"{name} (CUDA sanitizer): no race in one eager forward"
        race = races[0]
        cur, prev = race["current"], race["previous"]
        where = (prev["library_lines"] or [{}])[0]
        return (
            f"{name} (CUDA sanitizer): {len(races)} race(s); {cur['operator']} {cur['access']} "
            f"{cur['argument']} on stream {cur['stream']} while {prev['operator']} "
            f"{prev['access']} it on stream {prev['stream']} at "
            f"{where.get('file', '?')}:{where.get('line', '?')} ({where.get('code', '')})"
        )
    errs = [step["rel_err"] for step in result["eager"]]
    eager = "exact" if all(s["exact"] for s in result["eager"]) else f"rel. err {max(errs)}"
    capture = result["capture"]
    if capture["ok"]:
        text = f"{name}: eager {eager}; capture ok, replay rel. err {capture['replay']['rel_err']}"
    else:
        root = capture["root"]
        code = f"{root['cuda_code']} " if root["cuda_code"] else ""
        line = (capture["library_lines"] or [None])[0]
        at = f" at {line['file']}:{line['line']} ({line['code']})" if line else " (no library line)"
        text = f"{name}: eager {eager}; capture failed: {code}{root['message'][:90]}{at}"
    for violation in result["sanitizer"]:
        line = (violation["library_lines"] or [None])[0]
        at = f"{line['file']}:{line['line']} ({line['code']})" if line else "no library line"
        text += f"; sanitizer {violation['rule']} at {at}"
    return text


def run_in_child(adapter: Adapter, variant: str, csan: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", adapter.module, "--child", variant]
    if csan:
        command.append("--csan")
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return {"variant": variant, "error": f"timed out after {CHILD_TIMEOUT_S} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"variant": variant, "error": f"exit {done.returncode}: {tail}"}
    result: dict[str, Any] = json.loads(lines[-1])
    result["wall_s"] = round(time.monotonic() - started, 1)
    return result


def main(adapter: Adapter, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {adapter.module}")
    parser.add_argument("--variant", action="append", choices=sorted(adapter.variants))
    parser.add_argument("--csan", action="store_true", help="one eager forward under CSAN")
    parser.add_argument("-o", "--output", help="write the results as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        import_library(adapter.library, adapter.distribution)
        import torch

        if not torch.cuda.is_available():
            print(f"{adapter.module}: no CUDA device: this adapter captures CUDA graphs")
            return 2
    except LibraryMissing as missing:
        print(f"{adapter.module}: {missing}")
        return 2
    except ImportError as exc:
        print(f"{adapter.module}: torch is not importable here ({exc})")
        return 2
    if args.child:
        try:
            result = run_one(adapter, args.child, args.csan)
        except Exception as exc:  # a set-up or forward failure: one line, never a traceback
            result = {"variant": args.child, "error": one_line(exc)}
        print(json.dumps(result))
        return 0
    results = [run_in_child(adapter, v, args.csan) for v in args.variant or list(adapter.variants)]
    for result in results:
        print(summary(result))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
    failed = any("error" in r for r in results)
    return 1 if failed else 0
