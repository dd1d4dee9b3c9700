"""GPU oracle for the facts `offlint check` learned in issue 24 (tests/data/spellings/).

Each case is the run-time shape of one spelling file (or a contrast/control beside it), run in
its own subprocess because a failed capture can poison the CUDA context. A case records whether
the capture succeeded or the root CUDA error of its exception chain, whether replays match an
eager reference after the inputs (and pinned host sources) change in place, and, for side-stream
work, whether a replay actually performed it. `agrees` compares the outcome with the checker's
claim. Standard library and torch only: the device machine has no libcst.

    python3 benchmarks/spellings_oracle.py --out benchmarks/results/spellings-oracle-X.json
    python3 benchmarks/spellings_oracle.py --case f_saved_current_copy   # one case, JSON line
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Root-cause names by the text CUDA and PyTorch put in the message (PyTorch's RuntimeError says
# "CUDA error: <cudaGetErrorString>", not the number).
CUDA_ERRORS: tuple[tuple[str, str], ...] = (
    ("operation not permitted when stream is capturing", "cuda:900"),
    ("operation failed due to a previous error during capture", "cuda:901"),
    ("capture sequence contains a fork that was not joined", "cuda:904"),
    ("dependency created on uncaptured work in another stream", "cuda:905"),
    ("operation would make the legacy stream depend on a capturing blocking stream", "cuda:906"),
    ("operation not permitted on an event last recorded in a capturing stream", "cuda:907"),
    ("unless the CPU tensor is pinned", "pinned-copy-error"),
)
TOL = 1e-3
SIZE = 256
RESULT_PREFIX = "RESULT "


@dataclass(frozen=True)
class Case:
    name: str
    file: str | None  # the spelling file under tests/data/spellings/ it runs, if any
    claim_codes: tuple[str, ...]  # the checker's codes for this shape; () = claimed clean
    claim: str
    expected: frozenset[str]  # outcomes that agree with the claim
    run: Callable[[], dict[str, Any]]


def _drive_prefetch(mod: Any) -> dict[str, Any]:
    """One eager forward, a capture, then replays with new inputs and new pinned weights: whether
    each replay redid the side-stream copy (`mod.buf` follows `mod.w`) and matched eager."""
    import torch

    x = torch.randn(SIZE, SIZE, device="cuda")
    mod(x)
    torch.cuda.synchronize()
    graph, out, info = _capture(lambda: mod(x))
    if info is not None:
        return _failed(info)

    def mutate(round_: int) -> None:
        x.copy_(torch.randn(SIZE, SIZE, device="cuda"))
        mod.w.copy_(torch.randn(SIZE, SIZE))

    side = lambda: (mod.buf, mod.w)  # noqa: E731
    res = _replays(graph, out, mutate, lambda: x @ mod.w.cuda(), side)
    return {"capture_ok": True, **res}


# --------------------------------------------------------------------------- helpers


def _classify(exc: BaseException) -> dict[str, Any]:
    """Walk __cause__/__context__ to the root; name each link by its message."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        chain.append(link)
        link = link.__cause__ or link.__context__
    codes = []
    for item in chain:
        text = str(item)
        code = next((name for needle, name in CUDA_ERRORS if needle in text), "other")
        codes.append(code)
    known = [code for code in codes if code != "other"]
    root = known[-1] if known else "other"
    return {
        "root": root,
        "chain": codes,
        "messages": [f"{type(i).__name__}: {str(i).splitlines()[0][:200]}" for i in chain],
    }


def _capture(
    fn: Callable[[], Any], stream: Any = None
) -> tuple[Any, Any, dict[str, Any] | None]:
    import torch

    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream):
            out = fn()
        torch.cuda.synchronize()
    except Exception as exc:  # the probe's whole point: record whatever capture raised
        return None, None, _classify(exc)
    return graph, out, None


def _err(a: Any, b: Any) -> float:
    # on the host: one side may be a pinned host source, the other its device copy
    return float((a.detach().float().cpu() - b.detach().float().cpu()).abs().max().item())


def _seed() -> None:
    import torch

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False


def _replays(
    graph: Any,
    out: Any,
    mutate: Callable[[int], None],
    reference: Callable[[], Any],
    side_buffer: Callable[[], tuple[Any, Any]] | None = None,
) -> dict[str, Any]:
    """Replay twice after changing the inputs in place; compare with the eager reference.
    side_buffer returns (buffer the side-stream work writes, what it should hold)."""
    import torch

    errs = []
    side_ok = []
    for round_ in (1, 2):
        mutate(round_)
        graph.replay()
        torch.cuda.synchronize()
        errs.append(_err(out, reference()))
        if side_buffer is not None:
            buf, want = side_buffer()
            side_ok.append(_err(buf, want) <= TOL)
    result: dict[str, Any] = {"replay_max_abs_err": max(errs)}
    if side_buffer is not None:
        result["side_work_replayed"] = all(side_ok)
    if max(errs) <= TOL:
        result["outcome"] = "ok"
    elif side_buffer is not None and not all(side_ok):
        result["outcome"] = "silent-missing"
    else:
        result["outcome"] = "wrong"
    return result


def _failed(info: dict[str, Any]) -> dict[str, Any]:
    return {"capture_ok": False, "outcome": info["root"], "error": info}


# --------------------------------------------------------------------------- 1 f_saved_current


def _saved_stream_case(
    copy_into_buffer: bool, live: bool = False, construct_on_side: bool = False
) -> dict[str, Any]:
    """f_saved_current.py: the stream is saved as current_stream() at construction (on the
    default stream, or on a user stream); torch.cuda.graph captures on its own side stream."""
    import torch

    _seed()

    class Prefetch(torch.nn.Module):
        def __init__(self, w: Any) -> None:
            super().__init__()
            self.w = w.pin_memory()
            self.copy_stream = torch.cuda.current_stream()
            self.buf = torch.empty_like(w, device="cuda")

        def forward(self, x: Any) -> Any:
            stream = torch.cuda.current_stream() if live else self.copy_stream
            with torch.cuda.stream(stream):
                if copy_into_buffer:
                    self.buf.copy_(self.w, non_blocking=True)
                    wd = self.buf
                else:
                    wd = self.w.to("cuda", non_blocking=True)
                    self.buf = wd  # kept alive: shows whether a replay redid the copy
            return x @ wd

    w = torch.randn(SIZE, SIZE)
    if construct_on_side:
        with torch.cuda.stream(torch.cuda.Stream()):
            mod = Prefetch(w)
    else:
        mod = Prefetch(w)
    return _drive_prefetch(mod)


# --------------------------------------------------------------------------- 2 h_set_stream


def _set_stream_case(copy_into_buffer: bool) -> dict[str, Any]:
    import torch

    _seed()

    class Prefetch(torch.nn.Module):
        def __init__(self, w: Any) -> None:
            super().__init__()
            self.w = w.pin_memory()
            self.side = torch.cuda.Stream()
            self.buf = torch.empty_like(w, device="cuda")

        def forward(self, x: Any) -> Any:
            main = torch.cuda.current_stream()
            torch.cuda.set_stream(self.side)
            if copy_into_buffer:
                self.buf.copy_(self.w, non_blocking=True)
                wd = self.buf
            else:
                wd = self.w.to("cuda", non_blocking=True)
                self.buf = wd  # kept alive: shows whether a replay redid the copy
            torch.cuda.set_stream(main)
            return x @ wd

    return _drive_prefetch(Prefetch(torch.randn(SIZE, SIZE)))


# --------------------------------------------------------------------------- 3 g_dict_stream


def _dict_stream_case(copy_into_buffer: bool) -> dict[str, Any]:
    import torch

    _seed()

    class Prefetch(torch.nn.Module):
        def __init__(self, w: Any) -> None:
            super().__init__()
            self.w = w.pin_memory()
            self.streams = {"copy": torch.cuda.Stream()}
            self.buf = torch.empty_like(w, device="cuda")

        def forward(self, x: Any) -> Any:
            s = self.streams["copy"]
            with torch.cuda.stream(s):
                if copy_into_buffer:
                    self.buf.copy_(self.w, non_blocking=True)
                    wd = self.buf
                else:
                    wd = self.w.to("cuda", non_blocking=True)
                    self.buf = wd  # kept alive: shows whether a replay redid the copy
            torch.cuda.current_stream().wait_stream(s)
            return x @ wd

    return _drive_prefetch(Prefetch(torch.randn(SIZE, SIZE)))


# --------------------------------------------------------------------------- 4 i_to_cpu


def _to_cpu_case(non_blocking: bool) -> dict[str, Any]:
    import torch

    _seed()

    class Offload(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.s = torch.cuda.Stream()

        def forward(self, x: Any) -> Any:
            y = x * 2
            host = y.to("cpu", non_blocking=non_blocking)
            return y, host

    mod = Offload()
    x = torch.randn(SIZE, SIZE, device="cuda")
    mod(x)
    torch.cuda.synchronize()
    graph, out, info = _capture(lambda: mod(x))
    if info is not None:
        return _failed(info)
    y, host = out

    def mutate(round_: int) -> None:
        x.copy_(torch.randn(SIZE, SIZE, device="cuda"))

    # the host copy must be redone by every replay: `host` follows x
    res = _replays(graph, y, mutate, lambda: x * 2, lambda: (host, (x * 2).cpu()))
    return {"capture_ok": True, "host_is_pinned": bool(host.is_pinned()), **res}


# --------------------------------------------------------------------------- 5 j_pin_runtime


def _pin_runtime_case(flag: bool) -> dict[str, Any]:
    import torch

    _seed()

    def should_pin() -> bool:
        return flag

    class Offload(torch.nn.Module):
        def __init__(self, w: Any) -> None:
            super().__init__()
            self.s = torch.cuda.Stream()
            self.host = torch.empty(w.shape, pin_memory=should_pin())
            self.host.copy_(w)

        def forward(self, x: Any) -> Any:
            wd = self.host.to("cuda", non_blocking=True)
            return x @ wd

    mod = Offload(torch.randn(SIZE, SIZE))
    x = torch.randn(SIZE, SIZE, device="cuda")
    mod(x)
    torch.cuda.synchronize()
    graph, out, info = _capture(lambda: mod(x))
    if info is not None:
        return _failed(info)

    def mutate(round_: int) -> None:
        x.copy_(torch.randn(SIZE, SIZE, device="cuda"))
        mod.host.copy_(torch.randn(SIZE, SIZE))  # a replay re-reads the same host address

    res = _replays(graph, out, mutate, lambda: x @ mod.host.cuda())
    return {"capture_ok": True, "host_is_pinned": bool(mod.host.is_pinned()), **res}


# --------------------------------------------------------------------------- 6 OFL101 spellings


def _uncaptured_event_case(spelling: str) -> dict[str, Any]:
    """a_untyped / b_helper / c_base: a prefetch issued in warm-up records the event; the
    capture waits on it through an untyped parameter, a helper, or an inherited method."""
    import torch

    _seed()

    def wait_for(ev: Any) -> None:
        ev.wait()

    class Base:
        event: Any
        buf: Any

        def get(self) -> Any:
            self.event.wait()
            return self.buf

    class Prefetcher(Base):
        def __init__(self) -> None:
            self.stream = torch.cuda.Stream()
            self.event = torch.cuda.Event()

        def prefetch(self, w: Any) -> None:
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                self.buf = w.to("cuda", non_blocking=True)
                self.event.record()

        def get(self) -> Any:
            if spelling == "c_base":
                return super().get()
            if spelling == "b_helper":
                wait_for(self.event)
                return self.buf
            self.event.wait()
            return self.buf

    def capture_untyped(prefetcher: Any, g: Any) -> Any:  # untyped in the file: same at run time
        with torch.cuda.graph(g):
            return prefetcher.get() * 2

    p = Prefetcher()
    p.prefetch(torch.randn(SIZE, SIZE).pin_memory())  # warm-up: recorded before any capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    try:
        out = capture_untyped(p, g)
        torch.cuda.synchronize()
    except Exception as exc:
        return _failed(_classify(exc))
    g.replay()
    torch.cuda.synchronize()
    return {"capture_ok": True, "outcome": "ok", "replay_max_abs_err": _err(out, p.buf * 2)}


# --------------------------------------------------------------------------- 7 n_segmented


def _segmented_case(use_graph_context: bool) -> dict[str, Any]:
    """Segments as separate captures on one capture stream, the breaks run eagerly on it:
    seg A captured, eager fork + side copy, seg B captured (plain work, the side copy may be
    in flight), eager join, seg C captured reading the side copy's buffer."""
    import torch

    _seed()
    big = 4096  # a 4 MiB fp32 side copy, not waited for before seg B's capture
    cap = torch.cuda.Stream()
    side = torch.cuda.Stream()
    w_host = torch.randn(big, SIZE).pin_memory()
    w = torch.empty(big, SIZE, device="cuda")  # static: the graphs read a fixed address
    x = torch.randn(SIZE, big, device="cuda")

    def start() -> None:  # eager break 1: fork
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            w.copy_(w_host, non_blocking=True)

    def finish() -> None:  # eager break 2: join
        torch.cuda.current_stream().wait_stream(side)

    segs = []
    outs: dict[str, Any] = {}

    def seg(name: str, fn: Callable[[], Any]) -> None:
        g = torch.cuda.CUDAGraph()
        if use_graph_context:
            with torch.cuda.graph(g, stream=cap):
                outs[name] = fn()
        else:  # no device-wide synchronize between segments, as a breakable capture
            with torch.cuda.stream(cap):
                g.capture_begin()
                try:
                    outs[name] = fn()
                finally:
                    g.capture_end()
        segs.append(g)

    # warm-up, eagerly, on the capture stream
    with torch.cuda.stream(cap):
        start()
        finish()
        _ = (x * 2 + 1) @ w
    torch.cuda.synchronize()
    try:
        seg("a", lambda: x * 2)
        with torch.cuda.stream(cap):
            start()
        seg("b", lambda: outs["a"] + 1)
        with torch.cuda.stream(cap):
            finish()
        seg("c", lambda: outs["b"] @ w)
        torch.cuda.synchronize()
    except Exception as exc:
        return _failed(_classify(exc))

    errs = []
    side_ok = []
    for _round in (1, 2):
        x.copy_(torch.randn(SIZE, big, device="cuda"))
        w_host.copy_(torch.randn(big, SIZE))
        with torch.cuda.stream(cap):
            segs[0].replay()
            start()
            segs[1].replay()
            finish()
            segs[2].replay()
        torch.cuda.synchronize()
        errs.append(_err(outs["c"], (x * 2 + 1) @ w_host.cuda()))
        side_ok.append(_err(w, w_host) <= TOL)
    # fp32 sums over 4096 terms: compare relative to the output's scale
    scale = float(outs["c"].abs().max().item())
    ok = max(errs) <= TOL * max(1.0, scale)
    return {
        "capture_ok": True,
        "outcome": "ok" if ok else "wrong",
        "replay_max_abs_err": max(errs),
        "side_work_replayed": all(side_ok),
    }


# --------------------------------------------------------------------------- the table

OFL104_OUTCOMES = frozenset({"cuda:900", "silent-missing"})
CASES: tuple[Case, ...] = (
    Case("f_saved_current", "f_saved_current.py", ("OFL104",),
         "stream saved as current_stream() at construction is not the capture stream: "
         "OFL104 (900, or the work silently missing from replays)",
         OFL104_OUTCOMES, lambda: _saved_stream_case(copy_into_buffer=False)),
    Case("f_saved_current_copy", "f_saved_current.py", ("OFL104",),
         "as f_saved_current, copying into a static buffer (no allocation): OFL104",
         OFL104_OUTCOMES, lambda: _saved_stream_case(copy_into_buffer=True)),
    Case("f_saved_current_side", "f_saved_current.py", ("OFL104",),
         "as f_saved_current_copy, constructed while a user stream was current: OFL104",
         OFL104_OUTCOMES,
         lambda: _saved_stream_case(copy_into_buffer=True, construct_on_side=True)),
    Case("f_live_current_control", None, (),
         "control: current_stream() read inside the forward is the capture stream: legal",
         frozenset({"ok"}), lambda: _saved_stream_case(copy_into_buffer=True, live=True)),
    Case("h_set_stream", "h_set_stream.py", ("OFL104",),
         "torch.cuda.set_stream(side) ... set_stream(main) with no fork: OFL104",
         OFL104_OUTCOMES, lambda: _set_stream_case(copy_into_buffer=False)),
    Case("h_set_stream_copy", "h_set_stream.py", ("OFL104",),
         "as h_set_stream, copying into a static buffer (no allocation): OFL104",
         OFL104_OUTCOMES, lambda: _set_stream_case(copy_into_buffer=True)),
    Case("g_dict_stream", "g_dict_stream.py", ("OFL104", "OFL102"),
         "stream kept in a dict, work with no fork, then wait_stream: OFL104 + OFL102 "
         "(capture fails: 900 at the unforked allocation or 905 at the join)",
         frozenset({"cuda:900", "cuda:905"}), lambda: _dict_stream_case(copy_into_buffer=False)),
    Case("g_dict_stream_copy", "g_dict_stream.py", ("OFL104", "OFL102"),
         "as g_dict_stream, copying into a static buffer: the join is OFL102 (905)",
         frozenset({"cuda:905"}), lambda: _dict_stream_case(copy_into_buffer=True)),
    Case("i_to_cpu", "i_to_cpu.py", (),
         "y.to('cpu', non_blocking=True) of a CUDA tensor in capture is no host sync: clean",
         frozenset({"ok"}), lambda: _to_cpu_case(non_blocking=True)),
    Case("i_to_cpu_blocking", None, ("OFL105",),
         "contrast: y.to('cpu') (blocking) in capture fails (OFL105)",
         frozenset({"cuda:900", "pinned-copy-error"}), lambda: _to_cpu_case(non_blocking=False)),
    Case("j_pin_runtime_false", "j_pin_runtime.py", ("OFL106",),
         "torch.empty(pin_memory=False) host, .to('cuda', non_blocking=True) in capture: OFL106",
         frozenset({"pinned-copy-error"}), lambda: _pin_runtime_case(flag=False)),
    Case("j_pin_runtime_true", "j_pin_runtime.py", (),
         "the same with pin_memory=True at run time: legal, each replay re-reads the host",
         frozenset({"ok"}), lambda: _pin_runtime_case(flag=True)),
    Case("a_untyped", "a_untyped.py", ("OFL101",),
         "wait on an event recorded in warm-up, reached through an untyped parameter: 905",
         frozenset({"cuda:905"}), lambda: _uncaptured_event_case("a_untyped")),
    Case("b_helper", "b_helper.py", ("OFL101",),
         "the same wait inside a helper that receives the stored event: 905",
         frozenset({"cuda:905"}), lambda: _uncaptured_event_case("b_helper")),
    Case("c_base", "c_base.py", ("OFL101",),
         "the same wait in a method inherited from a base class: 905",
         frozenset({"cuda:905"}), lambda: _uncaptured_event_case("c_base")),
    Case("n_segmented", "n_segmented.py", (),
         "fork in one eager break, join in a later one, captured work between "
         "(segments as torch.cuda.graph captures): legal",
         frozenset({"ok"}), lambda: _segmented_case(use_graph_context=True)),
    Case("n_segmented_nosync", "n_segmented.py", (),
         "as n_segmented, segments by capture_begin/capture_end with no device synchronize "
         "between them (the side copy in flight during the middle capture): legal",
         frozenset({"ok"}), lambda: _segmented_case(use_graph_context=False)),
)
BY_NAME = {case.name: case for case in CASES}


def run_case_in_subprocess(name: str, timeout: float = 60.0) -> tuple[dict[str, Any], str]:
    """Run one case in a fresh interpreter; return its record and the child's output."""
    case = BY_NAME[name]
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--case", name],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:  # a hung capture is an outcome too
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        proc = subprocess.CompletedProcess(exc.cmd, -9, out, f"timed out after {timeout}s")
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if lines:
        measured = json.loads(lines[-1][len(RESULT_PREFIX):])
    else:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        measured = {"capture_ok": None, "outcome": f"crashed rc={proc.returncode}",
                    "error": {"messages": tail}}
    record = {
        "name": case.name,
        "file": case.file,
        "claim_codes": list(case.claim_codes),
        "claim": case.claim,
        "expected_outcomes": sorted(case.expected),
        **measured,
        "agrees": measured["outcome"] in case.expected,
    }
    return record, proc.stdout + proc.stderr


def _environment() -> dict[str, Any]:
    import torch

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "driver": _driver(),
    }


def _driver() -> str:
    try:
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        return subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(BY_NAME), help="run one case in-process")
    parser.add_argument("--out", type=Path, help="write every case's record here (JSON)")
    parser.add_argument("--log", type=Path, help="the children's output (default: OUT.log)")
    args = parser.parse_args(argv)
    if args.case:
        try:
            result = BY_NAME[args.case].run()
        except Exception as exc:  # after the capture (a replay or a check): still a record
            result = {"capture_ok": None, "outcome": "harness-error", "error": _classify(exc)}
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return 0
    if args.out is None:
        parser.error("give --case NAME or --out FILE")
    log_path = args.log or args.out.with_suffix(".log")
    records = []
    log_parts = []
    for case in CASES:
        record, output = run_case_in_subprocess(case.name)
        records.append(record)
        log_parts.append(f"=== {case.name}\n{output}")
        print(f"{case.name:24s} {record['outcome']:18s} agrees={record['agrees']}", flush=True)
    report = {
        "what": "issue 24: GPU oracle for the spellings' facts (benchmarks/spellings_oracle.py)",
        **_environment(),
        "command": f"python3 benchmarks/spellings_oracle.py --out benchmarks/results/{args.out.name}",
        "cases": records,
        "all_agree": all(r["agrees"] for r in records),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    log_path.write_text("\n".join(log_parts), encoding="utf-8")
    return 0 if report["all_agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
