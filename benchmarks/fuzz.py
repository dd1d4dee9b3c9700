"""Fuzz `check` and `fix`: grammar-generated offloaders plus mutations of the fixtures and of the
rules' examples. Reports how many inputs were tried and how many failed, by kind.

    .venv/bin/python benchmarks/fuzz.py --inputs 10000 --seed 0 --out benchmarks/results/fuzz-10k

Properties, for every input:
- check: `check_source` never raises and never reports `internal-error` (syntax and decoding
  errors are fine: mutated inputs are often not Python);
- front ends: the skeleton front end (`check`'s default) and the libcst reference give the same
  diagnostics, errors and suppression count, the prefilter bypassed so that every input is
  analysed (a difference is a failure of its own kind, `front-ends-differ`, printed with its input);
- fix (inputs that parse): `fix_source` never raises nor reports `internal-error`, its output
  parses, fixing it again changes nothing, and a bystander block (odd whitespace, comments, no
  hazard) placed next to the code comes out byte for byte.

The generator is shared with tests/test_fuzz.py (a short, bounded run in CI).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from offlint.analysis.engine import FileSettings
    from offlint.diagnostics import FileReport

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# ---- grammar ---------------------------------------------------------------------------------

STREAMS = ("self.alt_stream", "self.copy_stream", "stream", "self.streams[i]", "side")
EVENTS = ("self._load_event", "event", "self.events[i]", "ev", "self.done")
TENSORS = ("x", "self.buf", "w", "self._device_tensors[name]", "out")


def _expr_stream(r: random.Random) -> str:
    return r.choice(STREAMS)


def _simple(r: random.Random) -> str:
    s, e, t = r.choice(STREAMS), r.choice(EVENTS), r.choice(TENSORS)
    return r.choice(
        [
            f"{s} = torch.cuda.Stream()",
            f"{e} = torch.cuda.Event()",
            f"{e}.record()",
            f"{e}.record({s})",
            f"{e}.wait()",
            f"{e}.wait({s})",
            f"{e}.synchronize()",
            f"{s}.wait_event({e})",
            f"torch.cuda.current_stream().wait_event({e})",
            f"{s}.wait_stream(torch.cuda.current_stream())",
            f"torch.cuda.current_stream().wait_stream({s})",
            f"{s}.synchronize()",
            "torch.cuda.synchronize()",
            f"{t}.record_stream({s})",
            f"{t}.record_stream(torch.cuda.current_stream())",
            f"{t} = {t}.to('cuda', non_blocking=True)",
            f"{t}.copy_(self.cpu_weights[name], non_blocking=True)",
            f"{t} = torch.empty(16, device='cpu', pin_memory=True)",
            f"{t} = torch.empty(16, device='cpu')",
            f"{t} = {t}.pin_memory()",
            f"n = {t}.item()",
            f"print({t}.tolist())",
            f"{e} = None",
            "self.offloaders[i + 1].start_onload()",
            "self.start_onload()",
            "tensors = self.wait_and_get_device_tensors()",
            "module.register_forward_pre_hook(self._hook)",
            "module.register_forward_hook(lambda *a: self.offload())",
            "capturing = torch.cuda.is_current_stream_capturing()",
            "g = torch.cuda.CUDAGraph()",
            "pass",
            f"del {t}",
            "return",
            f"return {t}",
        ]
    )


def _block(r: random.Random, depth: int, indent: str) -> list[str]:
    lines: list[str] = []
    for _ in range(r.randint(1, 4)):
        lines.extend(_statement(r, depth, indent))
    return lines


def _statement(r: random.Random, depth: int, indent: str) -> list[str]:
    inner = indent + "    "
    if depth <= 0 or r.random() < 0.55:
        return [indent + _simple(r)]
    kind = r.randrange(9)
    if kind == 0:
        return [f"{indent}with torch.cuda.stream({_expr_stream(r)}):", *_block(r, depth - 1, inner)]
    if kind == 1:
        out = [f"{indent}if torch.cuda.is_current_stream_capturing():", *_block(r, depth - 1, inner)]
        if r.random() < 0.5:
            out += [f"{indent}else:", *_block(r, depth - 1, inner)]
        return out
    if kind == 2:
        return [f"{indent}if not torch.cuda.is_current_stream_capturing():", *_block(r, depth - 1, inner)]
    if kind == 3:
        return [f"{indent}for i in range(len(self.offloaders)):", *_block(r, depth - 1, inner)]
    if kind == 4:
        return [f"{indent}with torch.cuda.graph(g):", *_block(r, depth - 1, inner)]
    if kind == 5:
        return [f"{indent}try:", *_block(r, depth - 1, inner), f"{indent}finally:", *_block(r, depth - 1, inner)]
    if kind == 6:
        name = r.choice(("_hook", "_on_forward_end", "forward", "_prefetch"))
        return [f"{indent}def {name}(*args, **kwargs):", *_block(r, depth - 1, inner)]
    if kind == 7:
        return [f"{indent}if {r.choice(EVENTS)} is not None:", *_block(r, depth - 1, inner)]
    return [f"{indent}while self.pending:", *_block(r, depth - 1, inner)]


METHODS = ("__init__", "start_onload", "wait_and_get_device_tensors", "forward", "post_init", "offload", "_hook")


def generate(r: random.Random) -> str:
    """One offloader-shaped module."""
    out = ["import torch", "from torch import nn", ""]
    for _ in range(r.randint(1, 2)):
        base = r.choice(("", "(nn.Module)", "(object)"))
        out += ["", f"class {r.choice(('Offloader', '_ModuleOffloader', 'LayerOffloader', 'Prefetcher'))}{base}:"]
        for name in r.sample(METHODS, r.randint(1, 4)):
            if r.random() < 0.15:
                out.append(f"    @{r.choice(('torch.compile', 'torch.no_grad()', 'staticmethod'))}")
            out.append(f"    def {name}(self, *args):")
            out += _block(r, r.randint(0, 3), "        ")
            out.append("")
    for _ in range(r.randint(0, 2)):
        out += ["", f"def {r.choice(('step', 'capture', '_hook_module', 'run'))}(x, module, offloaders):"]
        out += _block(r, r.randint(0, 3), "    ")
    return "\n".join(out) + "\n"


# ---- mutation --------------------------------------------------------------------------------

TOKENS = (
    "(", ")", ":", "[", "]", "{", "}", ",", ".", "=", " ", "\t", "\n", "\r\n", "\\\n", "'", '"', '"""',
    "#", "if ", "else", "with ", "def ", "class ", "return", "lambda", "await ", "async ", "yield",
    "torch.cuda.synchronize()", ".wait()", ".record()", "is_current_stream_capturing()", "self",
    "    ", "\x00", "\ufeff", "é", "\u2028", "print ", "f'{", "}'", "*", "**", "@", ":=",
)


def corpus() -> list[str]:
    seeds = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.py"))]
    try:
        from offlint.catalogue import load_catalogue

        for spec in load_catalogue().values():
            seeds += [ex.code for ex in (*spec.bad, *spec.good)]
            seeds += [ex.fixed for ex in spec.bad if ex.fixed]
    except Exception:  # pragma: no cover - the catalogue is optional for the generator
        pass
    return seeds


def mutate(r: random.Random, text: str) -> bytes:
    lines = text.split("\n")
    for _ in range(r.randint(1, 4)):
        op = r.randrange(9)
        if not lines:
            lines = [""]
        i = r.randrange(len(lines))
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[r.randrange(len(lines))])
        elif op == 2:
            j = r.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:
            lines[i] = "    " + lines[i]
        elif op == 4:
            lines[i] = lines[i][4:] if lines[i].startswith("    ") else lines[i]
        elif op == 5:
            pos = r.randint(0, len(lines[i]))
            lines[i] = lines[i][:pos] + r.choice(TOKENS) + lines[i][pos:]
        elif op == 6:
            pos = r.randint(0, len(lines[i]))
            lines[i] = lines[i][:pos] + lines[i][pos + r.randint(1, 8) :]
        elif op == 7:
            lines[i:i] = _block(r, 2, " " * (len(lines[i]) - len(lines[i].lstrip(" "))))
        else:
            lines = lines[: r.randint(0, len(lines))]  # truncate
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    roll = r.random()
    if roll < 0.05:
        data = data.replace(b"\n", b"\r\n")
    elif roll < 0.08:
        data = b"\xef\xbb\xbf" + data
    elif roll < 0.10:
        pos = r.randint(0, len(data))
        data = data[:pos] + bytes([r.randrange(128, 256)]) + data[pos:]
    return data


def make_input(seed: int, seeds: list[str]) -> tuple[str, bytes]:
    """(origin, bytes) for input number `seed`: about half generated, half mutated."""
    r = random.Random(seed)
    if r.random() < 0.5:
        text = generate(r)
        if r.random() < 0.3:
            return "generated+mutated", mutate(r, text)
        return "generated", text.encode()
    return "mutated", mutate(r, r.choice(seeds))


# ---- properties ------------------------------------------------------------------------------

BYSTANDER = (
    b"\n\n# a bystander: trailing spaces, tabs, odd quoting, no hazard   \n"
    b"def _bystander( a ,b = 'x' ):   \n"
    b"\treturn  a   # tab-indented\t\n"
)


# failure kinds whose examples are printed with their input (the input decides the difference)
PRINTED_WITH_INPUT = frozenset({"front-ends-differ"})


def _newline(data: bytes) -> bytes:
    """CRLF for a file whose every line ends in CRLF; LF otherwise (mixed files included)."""
    crlf = data.count(b"\r\n")
    return b"\r\n" if crlf and crlf == data.count(b"\n") else b"\n"


def failures_for(data: bytes, name: str = "fuzz.py", *, fix: bool = True) -> list[tuple[str, str]]:
    """[(kind, message)] for one input; empty when every property holds."""
    import libcst as cst

    from offlint.analysis.engine import FileSettings, check_source
    from offlint.catalogue import load_catalogue
    from offlint.diagnostics import ErrorKind
    from offlint.fixing.apply import FIXABLE_RULES, FixSettings, fix_source

    select = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)
    found: list[tuple[str, str]] = []
    try:
        report = check_source(data, name, FileSettings(select=select))
    except Exception as exc:
        return [("check-raised", f"{type(exc).__name__}: {exc}".splitlines()[0])]
    found += [("check-internal", e.message) for e in report.errors if e.kind is ErrorKind.INTERNAL]
    found += front_end_failures(data, name, FileSettings(select=select))
    if not fix or report.errors:
        return found
    try:
        cst.parse_module(data)
    except Exception:
        return found  # not Python (the prefilter skipped it): nothing for fix to promise
    nl = _newline(data)
    dressed = data + (b"" if data.endswith((b"\n", b"\r")) or not data else nl) + BYSTANDER.replace(b"\n", nl)
    try:
        compile(dressed, name, "exec", dont_inherit=True)
        compiles = True
    except Exception:  # libcst accepts some code CPython refuses (`return` outside a function)
        compiles = False
    try:
        first = fix_source(dressed, name, FixSettings(select=select))
    except Exception as exc:
        return [*found, ("fix-raised", f"{type(exc).__name__}: {exc}".splitlines()[0])]
    for error in first.errors:
        if error.kind is not ErrorKind.INTERNAL:
            continue
        if not compiles and "would not parse" in error.message:
            # fix refuses results that do not compile; the input did not either (reported
            # as internal-error by fix today: see the note in benchmarks/results/fuzz-*.txt)
            found.append(("fix-dropped-on-uncompilable-input", error.message))
        else:
            found.append(("fix-internal", error.message))
    try:
        cst.parse_module(first.fixed)
        if compiles:
            compile(first.fixed, name, "exec", dont_inherit=True)
    except Exception as exc:
        return [*found, ("fix-unparseable", f"{type(exc).__name__}: {exc}".splitlines()[0])]
    if not first.fixed.endswith(BYSTANDER.replace(b"\n", nl)):
        found.append(("fix-touched-bystander", "bytes outside the edits changed"))
    if first.fixed.startswith(b"\xef\xbb\xbf") != dressed.startswith(b"\xef\xbb\xbf"):
        found.append(("fix-touched-bystander", "BOM changed"))
    if nl == b"\r\n" and b"\n" in first.fixed.replace(b"\r\n", b""):
        found.append(("fix-touched-bystander", "CRLF file got LF lines"))
    if first.changed:
        try:
            second = fix_source(first.fixed, name, FixSettings(select=select))
        except Exception as exc:
            return [*found, ("fix-raised", f"second pass: {type(exc).__name__}: {exc}".splitlines()[0])]
        if second.fixed != first.fixed:
            found.append(("fix-not-idempotent", "a second fix changed the file again"))
    return found


def _outcome(report: FileReport) -> tuple[list[str], list[str], int]:
    """What a user sees of one file's report: the diagnostics (with their fix safety), the errors,
    the suppression count."""
    diagnostics = [
        f"{d.code} {d.location.line}:{d.location.column}-{d.location.end_line}:{d.location.end_column}"
        f" {d.fix_safety.value} {d.message} ({d.note})"
        for d in report.diagnostics
    ]
    return diagnostics, [f"{e.kind.value}: {e.message}" for e in report.errors], report.suppressed


def front_end_failures(data: bytes, name: str, settings: FileSettings) -> list[tuple[str, str]]:
    """[("front-ends-differ", what differs)] when the skeleton front end and the libcst reference
    disagree on `data` (analysed whole: the prefilter is bypassed), else []."""
    from offlint.analysis.engine import check_source

    outcomes = []
    for front_end in ("skeleton", "libcst"):
        try:
            report = check_source(
                data, name, dataclasses.replace(settings, front_end=front_end), prefiltered=True
            )
        except Exception as exc:
            return [("check-raised", f"{front_end} front end: {type(exc).__name__}: {exc}".splitlines()[0])]
        outcomes.append(_outcome(report))
    skeleton, reference = outcomes
    if skeleton == reference:
        return []
    if _libcst_refuses_valid_python(data, reference):
        # libcst's grammar is stricter than CPython's in corners (a form feed or a tab after
        # spaces in indentation, `class C(x=1, *a)`): the skeleton analyses code that runs, the
        # reference cannot parse it. Not a failure of the skeleton (tests/test_front_ends.py).
        return []
    parts = []
    for label, ours, theirs in zip(("diagnostics", "errors"), skeleton[:2], reference[:2], strict=True):
        only_ours = [x for x in ours if x not in theirs]
        only_theirs = [x for x in theirs if x not in ours]
        if only_ours or only_theirs or ours != theirs:
            parts.append(f"{label}: skeleton only {only_ours}, libcst only {only_theirs}")
    if skeleton[2] != reference[2]:
        parts.append(f"suppressed: skeleton {skeleton[2]}, libcst {reference[2]}")
    return [("front-ends-differ", "; ".join(parts).replace("\n", " "))]


def _libcst_refuses_valid_python(data: bytes, reference: tuple[list[str], list[str], int]) -> bool:
    from offlint.analysis.engine import DecodeError, decode_source

    if not any(error.startswith("syntax-error") for error in reference[1]):
        return False
    try:
        compile(decode_source(data), "<fuzz>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, DecodeError, RecursionError, MemoryError):
        return False
    return True


def _run_chunk(job: tuple[list[int], bool]) -> list[tuple[int, str, list[tuple[str, str]], float, bool]]:
    numbers, do_fix = job
    seeds = corpus()
    out = []
    for n in numbers:
        origin, data = make_input(n, seeds)
        started = time.perf_counter()
        try:
            found = failures_for(data, f"fuzz_{n}.py", fix=do_fix)
        except Exception:  # the harness itself: never let one input end the run
            found = [("harness", traceback.format_exc().splitlines()[-1])]
        out.append((n, origin, found, time.perf_counter() - started, do_fix))
    return out


def _visible(line: str) -> str:
    """`line` with every unprintable character but the tab escaped (`\\r`, `\\x0c`, `\\u2028`)."""
    return "".join(c if c.isprintable() or c == "\t" else ascii(c)[1:-1] for c in line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fix-every", type=int, default=1, help="run the fix properties on every Nth input")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, help="write OUT.txt and OUT.json")
    args = parser.parse_args(argv)

    numbers = list(range(args.seed, args.seed + args.inputs))
    jobs = []
    for chunk in (numbers[i : i + 50] for i in range(0, len(numbers), 50)):
        fix_part = [n for n in chunk if (n - args.seed) % args.fix_every == 0]
        rest = [n for n in chunk if (n - args.seed) % args.fix_every != 0]
        if fix_part:
            jobs.append((fix_part, True))
        if rest:
            jobs.append((rest, False))
    started = time.perf_counter()
    results: list[tuple[int, str, list[tuple[str, str]], float, bool]] = []
    crashed: list[int] = []
    pending = list(jobs)
    while pending:
        try:
            with ProcessPoolExecutor(max_workers=args.jobs) as pool:
                futures = [(job, pool.submit(_run_chunk, job)) for job in pending]
                pending = []
                for job, future in futures:
                    try:
                        results.extend(future.result())
                    except BrokenProcessPool:
                        pending.append(job)
        except BrokenProcessPool:
            pass
        if pending:  # a worker died (a crash of the process, e.g. SIGSEGV): run those one by one
            for numbers_, do_fix in pending:
                for n in numbers_:
                    with ProcessPoolExecutor(max_workers=1) as solo:
                        try:
                            results.extend(solo.submit(_run_chunk, ([n], do_fix)).result())
                        except BrokenProcessPool:
                            crashed.append(n)
            pending = []
    elapsed = time.perf_counter() - started

    by_kind: collections.Counter[str] = collections.Counter()
    by_origin: collections.Counter[str] = collections.Counter()
    examples: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
    failed_inputs = 0
    seeds = corpus()
    fixed_checked = sum(1 for r in results if r[4])
    for n, origin, found, _secs, _fix in results:
        by_origin[origin] += 1
        if found:
            failed_inputs += 1
        for kind, message in found:
            by_kind[kind] += 1
            if len(examples[kind]) < 5:
                example: dict[str, object] = {"input": n, "origin": origin, "message": message}
                if kind in PRINTED_WITH_INPUT:
                    example["source"] = make_input(n, seeds)[1].decode("utf-8", "backslashreplace")
                examples[kind].append(example)
    for n in crashed:
        by_kind["process-crash"] += 1
        failed_inputs += 1
        examples["process-crash"].append({"input": n})
    slowest = sorted(results, key=lambda r: -r[3])[:5]
    summary = {
        "command": "python benchmarks/fuzz.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "inputs": len(results) + len(crashed),
        "inputs_by_origin": dict(by_origin),
        "fix_properties_checked_on": fixed_checked,
        "failed_inputs": failed_inputs,
        "failures_by_kind": dict(by_kind),
        "examples": dict(examples),
        "seconds": round(elapsed, 1),
        "slowest_inputs": [{"input": r[0], "seconds": round(r[3], 2)} for r in slowest],
    }
    lines = [
        f"fuzz: {summary['inputs']} inputs (seed {args.seed}) in {summary['seconds']} s",
        "  by origin: " + ", ".join(f"{k} {v}" for k, v in sorted(by_origin.items())),
        f"  fix properties checked on {fixed_checked} inputs (the others: check only)",
        f"  failed inputs: {failed_inputs}",
    ]
    lines += [f"  {kind}: {count}" for kind, count in sorted(by_kind.items())] or ["  (no failures)"]
    for kind, kind_examples in sorted(examples.items()):
        for ex in kind_examples:
            lines.append(f"    e.g. {kind} input {ex['input']}: {ex.get('message', '')}")
            if "source" in ex:
                lines.append(f"      input {ex['input']} ({ex['origin']}), split at '\\n', other unprintables escaped:")
                lines += [f"      | {_visible(line)}" for line in str(ex["source"]).split("\n")]
    lines.append("  slowest: " + ", ".join(f"#{r[0]} {r[3]:.2f}s" for r in slowest))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".txt").write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if failed_inputs else 0


if __name__ == "__main__":
    sys.exit(main())
