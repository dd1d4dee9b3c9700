"""Fuzz `check` and `fix`: grammar-generated offloaders, mutations of the fixtures and of the
rules' examples, mutations of real offloader code (sglang, vLLM, diffusers, accelerate, DeepSpeed
releases, when downloaded: `python -m benchmarks.trees`), and hypothesmith programs (alone, and
appended to an offloader fix must not touch them). Reports how many inputs were tried and how
many failed, by kind.

    .venv/bin/python benchmarks/fuzz.py --inputs 20000 --seed 0 --out benchmarks/results/fuzz-20k

Each input runs in a process of its own (forked from a warm worker): a crash (a signal) is a
`process-crash`, and an input still running after `--timeout` seconds is killed and counted as a
`hang`. `--origins` weighs the input kinds (`generated`, `mutated`, `real`, `hypothesmith`).

Properties, for every input:
- check: `check_source` never raises and never reports `internal-error` (syntax and decoding
  errors are fine: mutated inputs are often not Python);
- front ends: the skeleton front end (`check`'s default) and the libcst reference give the same
  diagnostics, errors and suppression count, the prefilter bypassed so that every input is
  analysed (a difference is a failure of its own kind, `front-ends-differ`, printed with its input);
- fix (inputs that parse): `fix_source` never raises nor reports `internal-error`, its output
  parses, fixing it again changes nothing, and a bystander block (odd whitespace, comments, no
  hazard) placed next to the code comes out byte for byte; the fixed bytes are written as
  `fix --apply` writes them (`write_if_unchanged`) and read back unchanged. A fix refused because
  libcst would not reproduce the file byte for byte is counted (`fix-refused-round-trip`), not a
  failure: that refusal is the guarantee.

A long run can be made in chunks and added up (the same inputs as one run: each chunk's --seed
starts where the previous one ended, and chunk sizes are multiples of 50):

    for seed in 100 4100 8100; do .venv/bin/python benchmarks/fuzz.py --inputs 4000 --seed $seed --out /tmp/fuzz-$seed; done
    .venv/bin/python benchmarks/fuzz.py --merge /tmp/fuzz-*.json --out benchmarks/results/fuzz-12k

SIGTERM or Ctrl-C stops a run and writes what it finished (by 50-input chunk), marked
`stopped_early` with the number of inputs it was asked for.

The generator is shared with tests/test_fuzz.py (a short, bounded run in CI).
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import dataclasses
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    """The fixtures, every rule's examples (bad, good, fixed) and the blind sets' cases."""
    seeds = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.py"))]
    seeds += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "corpus" / "blind").glob("*/cases/*.py"))]
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


TREES = Path.home() / ".cache" / "offlint-trees"
# offloaders and stream code of real releases (`python -m benchmarks.trees` downloads them)
REAL_FILES = (
    "sglang-0.5.23/src/sglang/srt/utils/offloader.py",
    "sglang-0.5.23/src/sglang/multimodal_gen/runtime/managers/memory_managers/layerwise_offload.py",
    "sglang-0.5.23/src/sglang/srt/layers/dp_attention.py",
    "vllm-0.34.0/src/vllm/model_executor/offloader/prefetch.py",
    "vllm-0.34.0/src/vllm/v1/simple_kv_offload/worker.py",
    "vllm-0.34.0/src/vllm/models/deepseek_v41/nvidia/specialized_decode/engram/prefetch.py",
    "diffusers-0.36.0/src/diffusers/hooks/group_offloading.py",
    "accelerate-1.15.0/src/accelerate/hooks.py",
    "deepspeed-0.19.8/src/deepspeed/runtime/zero/partitioned_param_coordinator.py",
)
REAL_WINDOW_LINES = 200  # a larger file is cut to a window of about this many lines


def real_corpus() -> list[str]:
    found = []
    for name in REAL_FILES:
        for path in _real_paths(name)[:1]:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                found.append(path.read_text(encoding="utf-8"))
    return found


def _real_paths(name: str) -> list[Path]:
    """Where REAL_FILES' `tree/src/package/file.py` is: as named (a wheel's tree), or under the
    folder a source release unpacks into (`tree/src/tree/...`, `tree/src/tree/src/...`)."""
    tree, _, inside = name.partition("/src/")
    if (TREES / name).is_file():
        return [TREES / name]
    return sorted(
        path
        for pattern in (f"src/*/{inside}", f"src/*/src/{inside}")
        for path in (TREES / tree).glob(pattern)
        if path.is_file()
    )


def _window(r: random.Random, text: str) -> str:
    """The whole text, or about REAL_WINDOW_LINES lines of it starting at a top-level line."""
    lines = text.split("\n")
    if len(lines) <= REAL_WINDOW_LINES:
        return text
    starts = [i for i, line in enumerate(lines) if line[:1] not in ("", " ", "\t", "#", ")", "]", "}")]
    start = r.choice(starts) if starts else 0
    return "\n".join(lines[start : start + REAL_WINDOW_LINES]) + "\n"


def _deep(r: random.Random) -> str:
    """One line nested or chained past what libcst handles comfortably."""
    k = r.choice((50, 190, 400, 999, 1500, 4000))
    return r.choice(
        [
            "_Z = " + "(" * min(k, 199) + "1" + ")" * min(k, 199),
            "_Z = " + "[" * min(k, 199) + "]" * min(k, 199),
            "_Z = " + " + ".join(["1"] * k),
            "_Z = " + " and ".join(["a"] * k),
            "_Z = a" + ".b" * k,
            "_Z = a" + "[0]" * k,
            "_Z = f" + "()" * k,
            "_Z = " + "not " * k + "a",
            "_Z = (a\n" + ".b\n" * k + ")",
        ]
    )


def mutate_real(r: random.Random, text: str) -> bytes:
    """Mutations of real code: lines deleted or duplicated, indentation shifted, form feeds, lone
    carriage returns, BOMs, whitespace-only endings, deep nesting; then `mutate`'s on top, at times."""
    lines = _window(r, text).split("\n")
    for _ in range(r.randint(1, 3)):
        i = r.randrange(len(lines))
        op = r.randrange(10)
        if op == 0:
            del lines[i : i + r.randint(1, 3)]
        elif op == 1:
            lines[i:i] = lines[i : i + r.randint(1, 3)]
        elif op == 2:
            lines[i] = r.choice((" ", "  ", "    ", "\t")) + lines[i]
        elif op == 3:
            lines[i] = lines[i][r.randint(1, 4) :] if lines[i].startswith(" ") else lines[i]
        elif op == 4:  # a form feed at the start of a line or inside its indentation
            width = len(lines[i]) - len(lines[i].lstrip(" "))
            at = r.choice((0, width, r.randint(0, width)))
            lines[i] = lines[i][:at] + "\x0c" + lines[i][at:]
        elif op == 5:
            lines[i] = lines[i] + "\r"  # a lone CR where the line ends (`\r\n` once joined)
        elif op == 6:
            lines.insert(i, (len(lines[i]) - len(lines[i].lstrip(" "))) * " " + _deep(r))
        elif op == 7:
            lines[i] = lines[i] + r.choice(("   ", "\t", " \\", "  # trailing"))
        elif op == 8:
            lines.insert(i, "")
        else:
            lines[i] = lines[i] + "\ufeff" if r.random() < 0.5 else lines[i]
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    roll = r.random()
    if roll < 0.08:
        data = data.replace(b"\n", b"\r\n")
    elif roll < 0.14:
        data = b"\xef\xbb\xbf" + data
    elif roll < 0.17:
        data = b"\xef\xbb\xbf\xef\xbb\xbf" + data  # a second BOM
    elif roll < 0.22:
        data = data.rstrip(b"\n") + b"\r"  # ends in a lone CR
    elif roll < 0.27:
        data = data + b"\n\n" + r.choice((b"   ", b"\t", b"\x0c", b" \n  "))  # a whitespace-only end
    if r.random() < 0.2:
        data = mutate(r, data.decode("utf-8", "surrogatepass"))
    return data


def hypothesmith_programs(seed: int, count: int) -> list[str]:
    """`count` programs from hypothesmith (its grammar- and libcst-based strategies, alternately),
    the same for the same seed; [] when hypothesmith is not installed."""
    try:
        import hypothesmith
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hypothesis_seed
        from hypothesis import strategies as st
    except ImportError:
        return []
    found: list[str] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=max(1, count * 3),
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.one_of(hypothesmith.from_grammar(auto_target=False), hypothesmith.from_node(auto_target=False)))
    def collect(source: str) -> None:
        if len(found) < count and source not in found:
            found.append(source)

    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # hypothesmith compiles what it draws
        collect()
    return found


ORIGINS = ("generated", "mutated", "real", "hypothesmith")


def make_input(
    seed: int,
    seeds: list[str],
    *,
    real: list[str] | None = None,
    weights: dict[str, float] | None = None,
    program: str | None = None,
) -> tuple[str, bytes]:
    """(origin, bytes) for input number `seed`. By default about half generated, half mutated
    fixtures and examples; `weights` (per ORIGINS) adds real code and hypothesmith programs
    (`program`: the one drawn for this input, see `hypothesmith_programs`)."""
    r = random.Random(seed)
    origin = _origin(r, weights) if weights else ("generated" if r.random() < 0.5 else "mutated")
    if origin == "real" and real:
        return "real-mutated", mutate_real(r, r.choice(real))
    if origin == "hypothesmith" and program is not None:
        if r.random() < 0.5:
            return "hypothesmith", program.encode("utf-8", "surrogatepass")
        host = r.choice([text for text in seeds if "class" in text] or seeds)
        joined = host + ("" if host.endswith("\n") else "\n") + program
        return "hypothesmith+offloader", joined.encode("utf-8", "surrogatepass")
    if origin == "generated":
        text = generate(r)
        if r.random() < 0.3:
            return "generated+mutated", mutate(r, text)
        return "generated", text.encode()
    return "mutated", mutate(r, r.choice(seeds))


def _origin(r: random.Random, weights: dict[str, float]) -> str:
    roll = r.random() * sum(weights.values())
    for origin in ORIGINS:
        roll -= weights.get(origin, 0.0)
        if roll < 0:
            return origin
    return "mutated"


# ---- properties ------------------------------------------------------------------------------

BYSTANDER = (
    b"\n\n# a bystander: trailing spaces, tabs, odd quoting, no hazard   \n"
    b"def _bystander( a ,b = 'x' ):   \n"
    b"\treturn  a   # tab-indented\t\n"
)


# failure kinds whose examples are printed with their input (the input decides the difference)
PRINTED_WITH_INPUT = frozenset({"front-ends-differ"})


def _compile(data: bytes, name: str) -> None:
    """CPython's compile of an input, without printing its warnings about the input's code
    (`'set' object is not subscriptable; perhaps you missed a comma?`) into the run's output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        compile(data, name, "exec", dont_inherit=True)


def _newline(data: bytes) -> bytes:
    """CRLF for a file whose every line ends in CRLF; LF otherwise (mixed files included)."""
    crlf = data.count(b"\r\n")
    return b"\r\n" if crlf and crlf == data.count(b"\n") else b"\n"


# kinds counted and shown but not failures: the refusal is the guarantee holding
INFO_KINDS = frozenset({"fix-refused-round-trip", "front-ends-differ-deep"})


def failures_for(
    data: bytes, name: str = "fuzz.py", *, fix: bool = True, keep: bytes = b""
) -> list[tuple[str, str]]:
    """[(kind, message)] for one input; empty when every property holds. `keep`: bytes at the end
    of `data` that no fix may change (code appended to an offloader)."""
    import libcst as cst

    from offlint.analysis.engine import FileSettings, decode_source
    from offlint.analysis.guard import refusal
    from offlint.catalogue import load_catalogue
    from offlint.diagnostics import ErrorKind
    from offlint.fixing.apply import FIXABLE_RULES, FixSettings
    from offlint.fixing.loop import fix_source
    from offlint.pipeline.check import guarded_check

    select = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)
    found: list[tuple[str, str]] = []
    try:
        report = guarded_check(data, name, FileSettings(select=select))  # as `offlint check` runs it
    except Exception as exc:
        return [("check-raised", f"{type(exc).__name__}: {exc}".splitlines()[0])]
    found += [("check-internal", e.message) for e in report.errors if e.kind is ErrorKind.INTERNAL]
    found += front_end_failures(data, name, FileSettings(select=select))
    found += add_noqa_failures(data, name, report, FileSettings(select=select))
    if not fix or report.errors:
        return found
    try:
        if refusal(decode_source(data)) is not None:
            return found  # what offlint never hands libcst, the harness does not either
        cst.parse_module(data)
    except Exception:
        return found  # not Python (the prefilter skipped it): nothing for fix to promise
    nl = _newline(data)
    dressed = data + (b"" if data.endswith((b"\n", b"\r")) or not data else nl) + BYSTANDER.replace(b"\n", nl)
    try:
        _compile(dressed, name)
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
        if "does not reproduce this file byte for byte" in error.message:
            found.append(("fix-refused-round-trip", error.message))
        elif "outside the statements it edits" in error.message:
            found.append(("fix-refused-outside-edits", error.message))
        elif not compiles and "would not parse" in error.message:
            # fix refuses results that do not compile; the input did not either (reported
            # as internal-error by fix today: see the note in benchmarks/results/fuzz-*.txt)
            found.append(("fix-dropped-on-uncompilable-input", error.message))
        else:
            found.append(("fix-internal", error.message))
    try:
        cst.parse_module(first.fixed)
        if compiles:
            _compile(first.fixed, name)
    except Exception as exc:
        return [*found, ("fix-unparseable", f"{type(exc).__name__}: {exc}".splitlines()[0])]
    if not first.fixed.endswith(BYSTANDER.replace(b"\n", nl)):
        found.append(("fix-touched-bystander", "bytes outside the edits changed"))
    elif keep and not first.fixed[: -len(BYSTANDER.replace(b"\n", nl))].rstrip(b"\r\n").endswith(keep.rstrip(b"\r\n")):
        found.append(("fix-touched-bystander", "the appended program changed"))
    if first.changed:
        found += _written_as_apply_writes(dressed, first.fixed)
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


_DIRECTIVE_LINE = re.compile(r"[ \t]*# offlint: ignore\[[A-Z0-9, ]+\][ \t]*(?:\r\n|\r|\n)?")
_LINE_END = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


_CODES = re.compile(r"(# offlint: ignore\[)([A-Z0-9, ]*)(\])")


def _extended(before: str, after: str) -> bool:
    """`after` is `before` with codes added to its existing `# offlint: ignore[...]` directive."""
    old, new = _CODES.search(before), _CODES.search(after)
    if old is None or new is None or _CODES.sub(r"\1\3", before, 1) != _CODES.sub(r"\1\3", after, 1):
        return False
    return {c.strip() for c in old.group(2).split(",")} <= {c.strip() for c in new.group(2).split(",")}


def add_noqa_failures(data: bytes, name: str, report: FileReport, settings: FileSettings) -> list[tuple[str, str]]:
    """`check --add-noqa` on the findings `report` shows: it never raises; every byte of the input
    is kept (each line is the start of a line of the output, in order; the only new lines are
    own-line directives); code that compiled still does, to the same tree; a second `check` shows
    no finding it placed a directive for, and a second `--add-noqa` adds nothing."""
    from offlint.analysis.engine import DecodeError, decode_source
    from offlint.analysis.guard import compile_quietly
    from offlint.analysis.positions import ast_statement_spans
    from offlint.pipeline.check import guarded_check
    from offlint.suppression import add_directives

    if not report.diagnostics:
        return []
    try:
        text = decode_source(data)
    except DecodeError:
        return []
    wanted: dict[int, set[str]] = {}
    for diagnostic in report.diagnostics:
        wanted.setdefault(diagnostic.location.line, set()).add(diagnostic.code)
    try:
        result = add_directives(text, wanted, lambda t: ast_statement_spans(compile_quietly(t)))
    except Exception as exc:
        return [("add-noqa-raised", f"{type(exc).__name__}: {exc}".splitlines()[0])]
    if not result.added:
        return []
    before, after = _LINE_END.findall(text), _LINE_END.findall(result.text)
    at = 0
    for line in after:
        if at < len(before) and (
            line.startswith(before[at].rstrip("\r\n").rstrip(" \t")) or _extended(before[at], line)
        ):
            at += 1
        elif not _DIRECTIVE_LINE.fullmatch(line):
            return [("add-noqa-lost-bytes", f"output line {line[:80]!r} is neither an input line nor a directive")]
    if at != len(before):
        return [("add-noqa-lost-bytes", f"input line {at + 1} is not in the output")]
    try:
        tree = ast.dump(compile_quietly(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    if tree is not None:
        try:
            if ast.dump(compile_quietly(result.text)) != tree:
                return [("add-noqa-changed-code", "the syntax tree changed")]
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return [("add-noqa-changed-code", f"its output no longer parses: {exc}".splitlines()[0])]
    placed = sum(len(codes) for codes in wanted.values()) - len(result.unplaced)
    again = guarded_check(result.text.encode("utf-8"), name, settings)
    if len(again.diagnostics) > len(report.diagnostics) - placed:
        shown = [f"{d.code}:{d.location.line}" for d in again.diagnostics]
        return [("add-noqa-not-suppressed", f"after adding directives check still shows {shown}")]
    if again.diagnostics:
        wanted_again: dict[int, set[str]] = {}
        for diagnostic in again.diagnostics:
            wanted_again.setdefault(diagnostic.location.line, set()).add(diagnostic.code)
        second = add_directives(result.text, wanted_again, lambda t: ast_statement_spans(compile_quietly(t)))
        if second.added:
            return [("add-noqa-not-idempotent", f"a second --add-noqa added {second.added}")]
    return []


def _written_as_apply_writes(original: bytes, fixed: bytes) -> list[tuple[str, str]]:
    """Write `fixed` over a file holding `original` as `fix --apply` does; read it back."""
    from offlint.fixing.writes import write_if_unchanged

    with tempfile.TemporaryDirectory(prefix="offlint-fuzz-") as folder:
        path = Path(folder) / "fuzz.py"
        path.write_bytes(original)
        error = write_if_unchanged(path, "fuzz.py", original, fixed, [folder])
        if error is not None:
            return [("fix-write-failed", error.one_line())]
        left = sorted(p.name for p in Path(folder).iterdir())
        if path.read_bytes() != fixed or left != ["fuzz.py"]:
            return [("fix-write-failed", f"read back differs or left {left}")]
    return []


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
    from offlint.analysis import engine
    from offlint.analysis.deep_stack import on_deep_stack

    outcomes = []
    for front_end in ("skeleton", "libcst"):
        chosen = dataclasses.replace(settings, front_end=front_end)
        try:  # on a deep stack, as `check` runs it
            report = on_deep_stack(lambda: engine.check_source(data, name, chosen, prefiltered=True))  # noqa: B023
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
    if any(e.startswith("too-deeply-nested") for e in reference[1]) and not skeleton[1]:
        # the guard keeps libcst from chains and nesting it parses in quadratic time or recurses
        # too deeply on (guard.py); CPython's tree, hence the skeleton, takes them
        return [("front-ends-differ-deep", reference[1][0])]
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
        # CPython's parser, as the skeleton uses it (a `return` outside a function parses: it is
        # the compiler that refuses it, and a mutation may add one)
        compile(decode_source(data), "<fuzz>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, DecodeError, RecursionError, MemoryError):
        return False
    return True


Job = tuple[list[int], bool, dict[str, float] | None, float]  # numbers, fix?, weights, timeout
Result = tuple[int, str, list[tuple[str, str]], float, bool, str | None]  # n, origin, found, s, fix?, source


def _run_chunk(job: Job) -> list[Result]:
    """Each input of the chunk in a child forked from this (warm) worker: a crash or a hang of
    one input is that input's result, and the worker goes on."""
    numbers, do_fix, weights, timeout = job
    seeds = corpus()
    _warm_up(seeds)
    real = real_corpus() if weights else []
    wanted = [n for n in numbers if weights and _origin(random.Random(n), weights) == "hypothesmith"]
    programs = dict(zip(wanted, hypothesmith_programs(numbers[0], len(wanted)), strict=False))
    out: list[Result] = []
    for n in numbers:
        origin, data = make_input(n, seeds, real=real, weights=weights, program=programs.get(n))
        keep = programs[n].encode("utf-8", "surrogatepass") if origin == "hypothesmith+offloader" else b""
        started = time.perf_counter()
        found = _in_child(data, f"fuzz_{n}.py", do_fix, keep, timeout)
        seconds = time.perf_counter() - started
        failed = any(kind not in INFO_KINDS for kind, _ in found)
        source = data.decode("utf-8", "surrogateescape") if failed else None
        out.append((n, origin, found, seconds, do_fix, source))
    return out


_WARM = False


def _warm_up(seeds: list[str]) -> None:
    """Import and exercise everything once in this worker, so that its forked children start warm
    (an import of libcst in every child cost more than most inputs)."""
    global _WARM
    if not _WARM:
        _properties(seeds[0].encode(), "warm.py", True, b"")
        _WARM = True


def _in_child(data: bytes, name: str, do_fix: bool, keep: bytes, timeout: float) -> list[tuple[str, str]]:
    if not hasattr(os, "fork"):  # pragma: no cover - no fork: in this process, no timeout
        return _properties(data, name, do_fix, keep)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without running the worker's cleanup
        os.close(read_end)
        payload = json.dumps(_properties(data, name, do_fix, keep)).encode()
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)
        os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    with os.fdopen(read_end, "rb", buffering=0) as pipe:
        import selectors

        with selectors.DefaultSelector() as selector:
            selector.register(pipe, selectors.EVENT_READ)
            started = time.monotonic()
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    # a hang is `timeout` seconds of the child's cpu: on a loaded machine a child
                    # can wait that long for a core (then it gets up to 6x the time in all)
                    used = _cpu_seconds(pid)
                    if used is not None and used < timeout and time.monotonic() - started < 6 * timeout:
                        deadline = time.monotonic() + timeout - used
                        continue
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    return [("hang", f"still running after {timeout:g} s of cpu; killed")]
                chunk = pipe.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return [("process-crash", signal.Signals(os.WTERMSIG(status)).name)]
    try:
        return [(str(kind), str(message)) for kind, message in json.loads(b"".join(chunks))]
    except ValueError:
        return [("process-crash", f"exit status {os.WEXITSTATUS(status)}, no result")]


def _cpu_seconds(pid: int) -> float | None:
    """User + system cpu seconds of a running process (Linux: /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _properties(data: bytes, name: str, do_fix: bool, keep: bytes) -> list[tuple[str, str]]:
    try:
        return failures_for(data, name, fix=do_fix, keep=keep)
    except Exception:  # the harness itself: never let one input end the run
        return [("harness", traceback.format_exc().splitlines()[-1])]


def _weights(spec: str) -> dict[str, float] | None:
    if not spec:
        return None
    weights = {}
    for part in spec.split(","):
        origin, _, weight = part.partition(":")
        if origin not in ORIGINS:
            raise SystemExit(f"--origins: unknown origin {origin!r} (one of {', '.join(ORIGINS)})")
        weights[origin] = float(weight or 1)
    return weights


def _visible(line: str) -> str:
    """`line` with every unprintable character but the tab escaped (`\\r`, `\\x0c`, `\\u2028`)."""
    return "".join(c if c.isprintable() or c == "\t" else ascii(c)[1:-1] for c in line)


class _Stopped(Exception):
    """SIGTERM or SIGINT: stop taking results and report what ran."""


def _stop(signum: int, _frame: object) -> None:
    raise _Stopped(signal.Signals(signum).name)


def summarize(
    results: list[Result], crashed: list[int], *, command: str, elapsed: float, planned: int, stopped: str | None
) -> dict[str, object]:
    """The JSON summary of a run (or of the part of it that ran before `stopped`)."""
    by_kind: collections.Counter[str] = collections.Counter()
    by_origin: collections.Counter[str] = collections.Counter()
    examples: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
    failed_inputs = 0
    fixed_checked = sum(1 for r in results if r[4])
    for n, origin, found, _secs, _fix, source in results:
        by_origin[origin] += 1
        if any(kind not in INFO_KINDS for kind, _ in found):
            failed_inputs += 1
        for kind, message in found:
            by_kind[kind] += 1
            if len(examples[kind]) < 5:
                example: dict[str, object] = {"input": n, "origin": origin, "message": message}
                if kind in PRINTED_WITH_INPUT and source is not None:
                    example["source"] = source
                examples[kind].append(example)
    for n in crashed:
        by_kind["process-crash"] += 1
        failed_inputs += 1
        examples["process-crash"].append({"input": n})
    slowest = sorted(results, key=lambda r: -r[3])[:5]
    summary: dict[str, object] = {
        "command": command,
        "inputs": len(results) + len(crashed),
        "inputs_by_origin": dict(by_origin),
        "fix_properties_checked_on": fixed_checked,
        "failed_inputs": failed_inputs,
        "failures_by_kind": dict(by_kind),
        "examples": dict(examples),
        "seconds": round(elapsed, 1),
        "slowest_inputs": [{"input": r[0], "seconds": round(r[3], 2)} for r in slowest],
    }
    if stopped is not None:
        summary["stopped_early"] = [{"command": command, "signal": stopped, "inputs_planned": planned}]
    return summary


def save_crashers(folder: Path, results: list[Result]) -> list[Path]:
    """Every failing input's bytes as folder/input-N.bin (the regression corpus's format)."""
    written = []
    for n, _origin, found, _secs, _fix, source in results:
        if source is None or not any(kind not in INFO_KINDS for kind, _ in found):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"input-{n}.bin"
        path.write_bytes(source.encode("utf-8", "surrogateescape"))
        written.append(path)
    return written


def merge(summaries: list[dict[str, Any]], command: str) -> dict[str, Any]:
    """One summary for runs that together cover a larger one (chunks of a long run): counts
    added up, the first five examples of each kind kept, the five slowest inputs of all."""

    def added(key: str) -> dict[str, int]:
        total: collections.Counter[str] = collections.Counter()
        for summary in summaries:
            total.update(summary[key])
        return dict(total)

    examples: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for summary in summaries:
        for kind, kind_examples in summary["examples"].items():
            examples[kind] += kind_examples[: 5 - len(examples[kind])]
    slowest = sorted((s for summary in summaries for s in summary["slowest_inputs"]), key=lambda s: -s["seconds"])
    merged: dict[str, Any] = {
        "command": command,
        "parts": [summary["command"] for summary in summaries],
        "inputs": sum(summary["inputs"] for summary in summaries),
        "inputs_by_origin": added("inputs_by_origin"),
        "fix_properties_checked_on": sum(summary["fix_properties_checked_on"] for summary in summaries),
        "failed_inputs": sum(summary["failed_inputs"] for summary in summaries),
        "failures_by_kind": added("failures_by_kind"),
        "examples": dict(examples),
        "seconds": round(sum(summary["seconds"] for summary in summaries), 1),
        "slowest_inputs": slowest[:5],
    }
    stopped = [summary for summary in summaries if "stopped_early" in summary]
    if stopped:
        merged["stopped_early"] = [stop for s in stopped for stop in s["stopped_early"]]
    return merged


def render_text(summary: dict[str, Any], *, title: str, timeout: float) -> str:
    lines = [
        f"fuzz: {summary['inputs']} inputs ({title}) in {summary['seconds']} s",
        "  by origin: " + ", ".join(f"{k} {v}" for k, v in sorted(summary["inputs_by_origin"].items())),
        f"  fix properties checked on {summary['fix_properties_checked_on']} inputs (the others: check only)",
        f"  failed inputs: {summary['failed_inputs']} (a hang: over {timeout:g} s; not failures: "
        + ", ".join(sorted(INFO_KINDS))
        + ")",
    ]
    for stop in summary.get("stopped_early") or []:
        lines.append(f"  STOPPED EARLY ({stop['signal']}): `{stop['command']}` ran part of its {stop['inputs_planned']} inputs")
    lines += [f"  {kind}: {count}" for kind, count in sorted(summary["failures_by_kind"].items())] or ["  (no failures)"]
    for kind, kind_examples in sorted(summary["examples"].items()):
        for ex in kind_examples:
            lines.append(f"    e.g. {kind} input {ex['input']}: {ex.get('message', '')}")
            if "source" in ex:
                lines.append(f"      input {ex['input']} ({ex['origin']}), split at '\\n', other unprintables escaped:")
                lines += [f"      | {_visible(line)}" for line in str(ex["source"]).split("\n")]
    lines.append("  slowest: " + ", ".join(f"#{s['input']} {s['seconds']:.2f}s" for s in summary["slowest_inputs"]))
    return "\n".join(lines) + "\n"


def _write(out: Path | None, summary: dict[str, Any], text: str) -> None:
    print(text, end="")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".txt").write_text(text)
        out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", "--n", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fix-every", type=int, default=1, help="run the fix properties on every Nth input")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, help="write OUT.txt and OUT.json")
    parser.add_argument(
        "--origins",
        default="",
        help="weights of the input kinds, e.g. generated:1,mutated:1,real:3,hypothesmith:3"
        " (default: half generated, half mutated fixtures and examples)",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds before an input counts as a hang")
    parser.add_argument(
        "--crashers",
        type=Path,
        help="write every failing input here as input-N.bin (tests/data/fuzz_crashers keeps them as regression tests)",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="instead of fuzzing, add up the summaries of runs that together make a larger one"
        " (a long run in chunks: the same inputs as one run when each chunk's --seed starts where"
        " the previous one ended and chunk sizes are multiples of 50)",
    )
    args = parser.parse_args(argv)
    command = "python benchmarks/fuzz.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.merge:
        summaries = [json.loads(path.read_text()) for path in args.merge]
        merged = merge(summaries, command)
        _write(args.out, merged, render_text(merged, title=f"{len(summaries)} runs merged", timeout=args.timeout))
        return 1 if merged["failed_inputs"] else 0
    weights = _weights(args.origins)

    # chunks of 50 from --seed: a chunk's hypothesmith programs are drawn from its first number, so
    # a run split at multiples of 50 sees the very inputs of the whole run
    numbers = list(range(args.seed, args.seed + args.inputs))
    jobs = []
    for chunk in (numbers[i : i + 50] for i in range(0, len(numbers), 50)):
        fix_part = [n for n in chunk if (n - args.seed) % args.fix_every == 0]
        rest = [n for n in chunk if (n - args.seed) % args.fix_every != 0]
        if fix_part:
            jobs.append((fix_part, True, weights, args.timeout))
        if rest:
            jobs.append((rest, False, weights, args.timeout))
    started = time.perf_counter()
    results: list[Result] = []
    crashed: list[int] = []
    stopped: str | None = None
    pool = ProcessPoolExecutor(max_workers=args.jobs)
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        futures = {pool.submit(_run_chunk, job): job for job in jobs}
        for future, job in futures.items():
            try:
                results.extend(future.result())
            except BrokenProcessPool:  # a worker itself died: its chunk is lost, counted as crashes
                crashed.extend(job[0])
    except _Stopped as stop:  # what finished is reported; the chunks under way are dropped
        stopped = str(stop)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for process in list(getattr(pool, "_processes", {}).values()):  # no public way to stop a worker
            with contextlib.suppress(OSError):
                process.kill()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        pool.shutdown(wait=stopped is None, cancel_futures=True)
    elapsed = time.perf_counter() - started

    if args.crashers is not None:
        save_crashers(args.crashers, results)
    summary = summarize(results, crashed, command=command, elapsed=elapsed, planned=args.inputs, stopped=stopped)
    _write(args.out, summary, render_text(summary, title=f"seed {args.seed}", timeout=args.timeout))
    return 1 if summary["failed_inputs"] or stopped else 0


if __name__ == "__main__":
    sys.exit(main())
