"""Static and dynamic agree (issue 17, item 4): the fixtures and bundled examples that can run,
each driven as a graph runner drives it, under the capture sanitizer; every violation the
sanitizer reports must have an `offlint check` finding with the same rule at one of its two
lines (the call it stopped, or the other line it names: the record, the fork, the capture).

Three users:
- `python -m offlint.probing.sanitize_main --report FILE -m tests.probe_agreement DRIVER` runs
  one driver under the sanitizer (what `sanitized()` starts, one process per driver: a capture
  CUDA rejected can leave a process unfit for the next);
- tests/test_probe_agreement_gpu.py runs every driver live and compares with `check`;
- tests/test_probe_agreement_cpu.py runs `check` against the lines `EXPECTED` names (what the
  H200 run recorded, benchmarks/results/agreement-h200-*.json), so a change to the linter that
  loses one of them fails without a GPU.

`python -m tests.probe_agreement --all --output FILE` writes the whole comparison as JSON (the
committed result). Drivers raise nothing: a driver is a graph runner that falls back to eager
when a capture fails, so one run shows every pair the sanitizer stops at.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = "fixtures"
EXAMPLES = "offlint/probing/examples"


@dataclass(frozen=True)
class Expected:
    """One violation a driver must produce: its rule, the file it is matched in, the code of
    the line (the line number is looked up, so edits elsewhere in the file do not matter), and
    which of the violation's stacks that line is in."""

    rule: str
    file: str
    code: str
    stack: str = "here"  # "here": the call it stopped; "other": the record/fork/capture
    gap: str | None = None  # why `check` has no finding there, when it is a known gap
    occurrence: int = 1  # the code's n-th line in the file, when it is on several

    def line(self) -> int:
        lines = (REPO / self.file).read_text().splitlines()
        numbers = [n for n, text in enumerate(lines, 1) if text.strip().startswith(self.code)]
        if len(numbers) < self.occurrence:
            raise LookupError(f"{self.code!r} not found {self.occurrence} time(s) in {self.file}")
        return numbers[self.occurrence - 1]


@dataclass(frozen=True)
class Driver:
    name: str
    files: tuple[str, ...]  # where the violations are matched (repo-relative)
    expected: tuple[Expected, ...]
    description: str


ORIGINAL = f"{FIXTURES}/sglang_offloader_original.py"
INLINE = f"{FIXTURES}/sglang_offloader_inline.py"
ZOO = f"{FIXTURES}/capture_hazards_zoo.py"
BLOCK_HOOK = f"{FIXTURES}/block_hook_offloader.py"
GROUP = f"{EXAMPLES}/group_offload.py"
PREFETCH = f"{EXAMPLES}/prefetch_offload.py"

DRIVERS: tuple[Driver, ...] = (
    Driver(
        "sglang-original",
        (ORIGINAL,),
        (Expected("OFL101", ORIGINAL, "self._load_event.wait()"),),
        "SGLang's offloader before its fix, in a graph runner (8 layers, batch 64 and 32)",
    ),
    Driver(
        "sglang-inline",
        (INLINE,),
        (
            Expected(
                "OFL201",
                INLINE,
                "output = functional_call(",
                gap="the sanitizer stops at the eager read of the capture-made tensor (the "
                "hook's functional_call) and names the capture; `check` names where the "
                "capture-made state escapes (`return self._device_tensors` in "
                "wait_and_get_device_tensors). Same rule, no common line: the tensor travels "
                "through a return value between the two",
            ),
        ),
        "the merged inline fix: eager forward after capture, before any replay",
    ),
    Driver("sglang-inline-fixed", (f"{FIXTURES}/sglang_offloader_inline_fixed.py",), (), "clean"),
    Driver("sglang-overlap", (f"{FIXTURES}/sglang_offloader_overlap.py",), (), "clean"),
    Driver(
        "block-hook",
        (BLOCK_HOOK,),
        (Expected("OFL101", BLOCK_HOOK, "torch.cuda.current_stream().wait_event(self.events[i])"),),
        "diffusers-style per-block hooks with a wrap-around prefetch, in a graph runner",
    ),
    Driver(
        "zoo",
        (ZOO,),
        (
            Expected("OFL107", ZOO, "return self.start.elapsed_time(self.end)"),
            Expected("OFL101", ZOO, "ready.wait()"),
            Expected("OFL102", ZOO, "torch.cuda.current_stream().wait_stream(self.copy_stream)"),
            Expected("OFL104", ZOO, "with torch.cuda.stream(self.evict_stream):"),
            Expected("OFL106", ZOO, "self.bias.copy_(self.bias_host, non_blocking=True)"),
            Expected("OFL105", ZOO, "if scale.abs().max().item() > 1e3:"),
            Expected(
                "OFL103",
                ZOO,
                "self.copy_stream.wait_stream(torch.cuda.current_stream())",
                stack="other",
            ),
        ),
        "each hazard of the zoo in a capture of its own",
    ),
    Driver("vllm-static-slots", (f"{FIXTURES}/vllm_static_slots.py",), (), "clean"),
    Driver("lookalikes", (f"{FIXTURES}/lookalikes_clean.py",), (), "clean"),
    Driver(
        "group-offload-stream",
        (GROUP,),
        (Expected("OFL105", GROUP, "self.stream.synchronize()"),),
        "bundled example: block-level group offloading with use_stream",
    ),
    Driver(
        "group-offload-outside",
        (GROUP,),
        (
            Expected(
                "OFL106",
                GROUP,
                'param.data = host.to("cuda", non_blocking=True)',
                occurrence=2,  # the copy without a stream (the first is on the copy stream)
                gap="whether `host` is pinned is decided at run time (`pin=False` for the group "
                "of layers outside the ModuleList, `pin=True` for the others); `check` sees a "
                "copy from a list of host tensors and cannot tell, so it reports nothing",
            ),
        ),
        "bundled example: a layer outside the ModuleList forms a group that is never pinned",
    ),
    Driver("group-offload-leaf", (GROUP,), (), "bundled example: leaf-level, no stream: clean"),
    Driver(
        "prefetch-offload",
        (PREFETCH,),
        (
            Expected(
                "OFL202",
                PREFETCH,
                "torch.cuda.current_stream().wait_event(self.done[position])",
                gap="found on the H200 (2026-12-03): with two captures back to back (no eager "
                "forward between them, as a runner capturing its batch sizes in a row does), "
                "the wrap-around prefetch of capture 1 leaves `in_capture[0]` set, and capture "
                "2's first wait waits on that event, last recorded in an ended capture (CUDA: "
                "invalid argument). The flag says *a* capture, not *this* one. `check`'s OFL202 "
                "looks for eager waits after a capture and reports nothing here; the probe's "
                "own life cycle never saw it because it runs eager warm-ups between captures",
            ),
        ),
        "bundled example: vLLM-style static slots with a wrap-around prefetch",
    ),
)
BY_NAME = {driver.name: driver for driver in DRIVERS}

# Runs that cannot be part of the comparison, and why (reported in the results file).
NOT_RUN = {
    "accelerate-offload": "the pageable copy is in accelerate's own hooks (site-packages), not "
    "in a file of this repository: nothing for `check` to be run on here",
    "sglang-offload (example)": "the same fixtures as sglang-original/-inline/-overlap",
    "compiled_capture_check.py": "OFL301 (a capture test in compiled code) is a compile-time "
    "question the sanitizer does not watch; the compiled life cycle (`--compiled`) covers it",
    "group_offload_record_stream.py": "OFL204 (record_stream on the allocating stream) is not "
    "watched by the sanitizer: no violation to compare",
}


# --- drivers (run under the sanitizer, on a GPU) -----------------------------------------------


def _attempt(what: str, body: Callable[[], Any]) -> Any:
    """A graph runner that falls back: report and go on (the sanitizer keeps the violation)."""
    try:
        return body()
    except Exception as exc:
        print(f"[{what}] {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return None


def _load(relative: str) -> Any:
    path = REPO / relative
    name = "agreement_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def graph_runner(model: Any, make_inputs: Callable[[int], Any], sizes: tuple[int, ...]) -> None:
    """Warm-up, a capture per batch size into one pool (stopping at the first that fails, as a
    runner falling back to eager would), an eager forward before any replay, replays."""
    import torch

    with torch.no_grad():
        for size in sizes:
            for _ in range(2):

                def warm_up(size: int = size) -> Any:
                    return model(make_inputs(size))

                _attempt(f"warm-up {size}", warm_up)
        pool = torch.cuda.graph_pool_handle()
        graphs = []
        for size in sizes:
            static_x = make_inputs(size)
            graph = torch.cuda.CUDAGraph()

            def capture(graph: Any = graph, static_x: Any = static_x) -> Any:
                with torch.cuda.graph(graph, pool=pool, stream=torch.cuda.Stream()):
                    return model(static_x)

            out = _attempt(f"capture {size}", capture)
            if out is None:
                break
            graphs.append((graph, static_x))
        _attempt("eager after capture", lambda: model(make_inputs(sizes[0])))
        for graph, static_x in graphs:
            static_x.copy_(make_inputs(static_x.shape[0]))
            _attempt("replay", graph.replay)
        _attempt("eager", lambda: model(make_inputs(sizes[0])))
        torch.cuda.synchronize()


def _sglang(fixture: str) -> None:
    from offlint.probing.examples.sglang_offload import build

    probed = build(fixture=fixture, layers=8, hidden=1024)
    graph_runner(probed.model, probed.make_inputs, (64, 32))


def _block_hook() -> None:
    import torch

    fixture = _load(BLOCK_HOOK)
    model = fixture.Transformer(hidden=256, depth=4)
    graph_runner(model, lambda size: torch.randn(size, 256, device="cuda"), (64, 32))


def _zoo() -> None:
    import torch
    from torch import nn

    zoo = _load(ZOO)
    dim = 256

    class Layer(nn.Module):
        """A layer whose `weight` is a plain attribute: the zoo's pre-hook assigns it."""

        def __init__(self) -> None:
            super().__init__()
            self.weight: Any = None
            self.scale = torch.ones(dim, device="cuda")

        def forward(self, x: Any) -> Any:
            return x @ self.weight

    layers = [Layer() for _ in range(3)]
    offloader = zoo.LayerOffloader(layers, [torch.randn(dim, dim) for _ in range(3)])
    x = torch.randn(8, dim, device="cuda")

    def capture(what: str, body: Callable[[], Any]) -> None:
        graph = torch.cuda.CUDAGraph()

        def run() -> None:
            with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
                body()

        _attempt(what, run)
        _attempt(f"{what}: synchronize", torch.cuda.synchronize)

    # OFL107 first: DecodeRunner captures on torch's shared capture stream, which a failed
    # capture could leave unusable.
    runner = zoo.DecodeRunner(nn.Linear(dim, dim, device="cuda"), x)
    with torch.no_grad():
        runner.step()  # eager warm-up (cuBLAS set-up stays out of the capture)
        torch.cuda.synchronize()
        _attempt("OFL107 capture", runner.capture)
        _attempt("OFL107 timed replay", runner.timed_replay)
        offloader.prefetch(1)  # an eager prefetch: its event is recorded outside any capture
        torch.cuda.synchronize()
        capture("OFL101", lambda: offloader.wait_and_get(1))
        capture("OFL102", offloader.drain)
        capture("OFL104", lambda: offloader.evict(0))
        capture("OFL106", offloader.load_bias)
        capture("OFL105", lambda: layers[2](x))  # never prefetched: no wait before the .item()
        capture("OFL103", lambda: offloader.prefetch(0))  # last: CUDA's 904 ends it


def _vllm_static_slots() -> None:
    import torch

    fixture = _load(f"{FIXTURES}/vllm_static_slots.py")
    weights = [torch.randn(256, 256) * 0.06 for _ in range(6)]
    model = fixture.OffloadedDecoder(weights, offloaded=[1, 3, 5])
    with torch.no_grad():
        captured = []
        for size in (64, 32):
            static_x = torch.randn(size, 256, device="cuda")
            captured.append(fixture.capture_decode_graph(model, static_x))
        model(torch.randn(64, 256, device="cuda"))  # eager, after the captures
        for graph, _ in captured:
            graph.replay()
        model(torch.randn(64, 256, device="cuda"))
        torch.cuda.synchronize()


def _lookalikes() -> None:
    import torch

    fixture = _load(f"{FIXTURES}/lookalikes_clean.py")
    fixture.warm_up(256)
    streamer = fixture.WeightStreamer(["a"], 256)
    streamer.barrier = fixture.HostBarrier(1)  # one loader thread here
    streamer.shard_ready["a"].set()
    streamer.load_shard("a")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
        streamer.load_shard("a")
    graph.replay()
    streamer.load_shard("a")
    streamer.report()
    assert streamer.converter.stdin is not None
    streamer.converter.stdin.close()
    streamer.shutdown()
    torch.cuda.synchronize()


def _group(variant: str) -> None:
    from offlint.probing.examples.group_offload import build

    probed = build(variant=variant, hidden=512, blocks=4)
    graph_runner(probed.model, probed.make_inputs, (64, 32))


def _prefetch() -> None:
    from offlint.probing.examples.prefetch_offload import build

    probed = build(layers=8, hidden=512)
    graph_runner(probed.model, probed.make_inputs, (64, 32))


RUNS: dict[str, Callable[[], None]] = {
    "sglang-original": lambda: _sglang("original"),
    "sglang-inline": lambda: _sglang("inline"),
    "sglang-inline-fixed": lambda: _sglang("inline_fixed"),
    "sglang-overlap": lambda: _sglang("overlap"),
    "block-hook": _block_hook,
    "zoo": _zoo,
    "vllm-static-slots": _vllm_static_slots,
    "lookalikes": _lookalikes,
    "group-offload-stream": lambda: _group("stream"),
    "group-offload-outside": lambda: _group("outside"),
    "group-offload-leaf": lambda: _group("leaf"),
    "prefetch-offload": _prefetch,
}


# --- the two sides ---------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def relative(file: str) -> str:
    try:
        return Path(file).resolve().relative_to(REPO).as_posix()
    except ValueError:
        return file


def sanitized(name: str, timeout_s: float = 300.0) -> dict[str, Any]:
    """Run driver `name` under the sanitizer (default mode: each violation stops its call, the
    driver falls back and goes on) in a process of its own; its report, files made relative."""
    with tempfile.TemporaryDirectory(prefix="offlint-agreement-") as scratch:
        report = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "offlint.probing.sanitize_main", "--report", str(report)]
        completed = subprocess.run(
            [*command, "-m", "tests.probe_agreement", name],
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        document: dict[str, Any] = (
            json.loads(report.read_text()) if report.is_file() else {"violations": []}
        )
    for violation in document.get("violations", []):
        for key in ("here", "other"):
            for site in violation.get(key) or []:
                site["file"] = relative(site["file"])
    document["returncode"] = completed.returncode
    document["output"] = (completed.stdout + completed.stderr)[-4000:]
    return document


_SUPPRESSION = re.compile(r"\s*# offlint: ignore\[[A-Z0-9, ]+\]")


def check_findings(files: tuple[str, ...] | list[str]) -> list[dict[str, Any]]:
    """`offlint check` at every confidence on copies of `files` with their `# offlint: ignore`
    comments removed (the bundled examples suppress the very hazards they demonstrate); line
    numbers are unchanged. Findings carry repo-relative file names."""
    with tempfile.TemporaryDirectory(prefix="offlint-agreement-check-") as scratch:
        root = Path(scratch)
        for file in files:
            target = root / file
            target.parent.mkdir(parents=True, exist_ok=True)
            text = (REPO / file).read_text(encoding="utf-8")
            target.write_text(
                "\n".join(_SUPPRESSION.sub("", line) for line in text.splitlines()) + "\n",
                encoding="utf-8",
            )
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "offlint",
                "check",
                "--output-format",
                "offlint-json",
                "--min-confidence",
                "low",
                "--no-cache",
                "--exit-zero",
                "--no-force-exclude",
                *files,
            ],
            cwd=root,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if completed.returncode != 0:
        raise RuntimeError(f"offlint check failed: {completed.stderr[-2000:]}")
    diagnostics: list[dict[str, Any]] = json.loads(completed.stdout)["diagnostics"]
    for diagnostic in diagnostics:
        diagnostic["filename"] = Path(diagnostic["filename"]).as_posix()
    return diagnostics


def innermost(sites: list[dict[str, Any]] | None, files: tuple[str, ...]) -> dict[str, Any] | None:
    """The innermost frame of a stack that lies in one of `files`."""
    return next((site for site in sites or [] if site["file"] in files), None)


def match(
    violation: dict[str, Any], findings: list[dict[str, Any]], files: tuple[str, ...]
) -> dict[str, Any]:
    """The violation's line pair (innermost frame of each stack in the files under test) and
    the `check` finding of the same rule at either line, if any."""
    pair = {key: innermost(violation.get(key), files) for key in ("here", "other")}
    found = None
    for key, site in pair.items():
        if site is None:
            continue
        found = next(
            (
                f
                for f in findings
                if f["code"] == violation["rule"]
                and f["filename"] == site["file"]
                and f["location"]["row"] == site["line"]
            ),
            None,
        )
        if found is not None:
            return {"pair": pair, "matched_by": key, "finding": _finding_summary(found)}
    same_rule = [
        _finding_summary(f)
        for f in findings
        if f["code"] == violation["rule"] and f["filename"] in files
    ]
    return {"pair": pair, "matched_by": None, "finding": None, "same_rule_elsewhere": same_rule}


def _finding_summary(finding: dict[str, Any]) -> dict[str, Any]:
    return {
        "code": finding["code"],
        "file": finding["filename"],
        "line": finding["location"]["row"],
        "confidence": finding.get("confidence"),
        "message": finding["message"],
    }


def compare_all(
    output: Path | None, runs: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Every driver under the sanitizer (or its report in `runs`, when it ran already),
    `check` on its files, each violation matched."""
    try:
        import libcst  # noqa: F401

        can_check = True
    except ImportError:
        can_check = False
    drivers = []
    for driver in DRIVERS:
        document = (runs or {}).get(driver.name) or sanitized(driver.name)
        findings = check_findings(driver.files) if can_check else []
        entries = []
        for violation in document["violations"]:
            entry = {
                "rule": violation["rule"],
                "what": violation["what"],
                "here": (violation.get("here") or [None])[0],
                "other": (violation.get("other") or [None])[0],
            }
            if can_check:
                entry.update(match(violation, findings, driver.files))
            entries.append(entry)
        expected = [
            {"rule": e.rule, "file": e.file, "line": e.line(), "stack": e.stack, "gap": e.gap}
            for e in driver.expected
        ]
        drivers.append(
            {
                "driver": driver.name,
                "description": driver.description,
                "files": list(driver.files),
                "violations": entries,
                "expected": expected,
                "check_findings": [_finding_summary(f) for f in findings],
                "sanitizer_returncode": document["returncode"],
                "counts": document.get("counts", {}),
                "limitations": document.get("limitations", []),
                "output_tail": document["output"][-1500:],
            }
        )
    gaps = [
        {"driver": d["driver"], **v}
        for d in drivers
        for v in d["violations"]
        if can_check and v.get("matched_by") is None
    ]
    result = {"checked": can_check, "drivers": drivers, "gaps": gaps, "not_run": NOT_RUN}
    if output is not None:
        output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.probe_agreement")
    parser.add_argument("driver", nargs="?", choices=sorted(RUNS))
    parser.add_argument("--all", action="store_true", help="run every driver and compare")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    if args.all:
        result = compare_all(args.output)
        for driver in result["drivers"]:
            rules = ", ".join(
                f"{v['rule']}@{(v['here'] or {}).get('line')}"
                + ("" if not result["checked"] else f" [{v.get('matched_by') or 'GAP'}]")
                for v in driver["violations"]
            )
            print(f"{driver['driver']}: {rules or 'no violation'}")
        print(f"gaps: {len(result['gaps'])} (check ran: {result['checked']})")
        return 0
    if args.driver is None:
        parser.error("name a driver or --all")
    RUNS[args.driver]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
