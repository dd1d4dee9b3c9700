"""The process pool and the prefilter change nothing but speed.

- `-j1` (no pool) and `-j2` (a pool) give identical reports on a tree of real hazards: every
  rule's catalogue examples, written out as files;
- the prefilter never drops a file that holds a finding: every catalogue example is analysed
  both with and without it, with identical results;
- the prefilter's capture gate knows every way model.py makes code capture-reachable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offlint.analysis import prefilter
from offlint.analysis.engine import (
    FileSettings,
    analyse_text,
    check_source,
    decode_source,
    may_hold_hazard,
)
from offlint.catalogue import RuleExample, load_catalogue
from offlint.config import SelectionOverrides
from offlint.diagnostics import FileReport, RunReport
from offlint.pipeline.check import EARLY_POOL_MIN_FILES, CheckOptions, check_paths

CATALOGUE = load_catalogue()
EXAMPLES = [ex for spec in CATALOGUE.values() for ex in (*spec.bad, *spec.good)]
ALL = frozenset(CATALOGUE)


def write_example_tree(root: Path, copies: int = 1) -> int:
    """Every example without special configuration, `copies` times; returns the file count."""
    count = 0
    for copy in range(copies):
        for example in EXAMPLES:
            if example.config:
                continue
            folder = root / f"copy{copy}" / example.rule.lower()
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{example.kind}{example.index}.py").write_text(example.code, encoding="utf-8")
            count += 1
    # files the prefilter settles: plain code, and code that only talks about streams
    (root / "plain.py").write_text("def f(x):\n    return x.item()\n", encoding="utf-8")
    (root / "http.py").write_text("def handler(req):\n    if req.stream:\n        print(req)\n", encoding="utf-8")
    return count + 2


def summary(report: RunReport) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for file in report.files:
        rows.extend((d.path, d.location, d.code, d.message, d.source_line, d.note) for d in file.diagnostics)
        rows.extend((e.path, e.kind, e.message, e.line) for e in file.errors)
        rows.append((file.path, "parsed", file.parsed, file.suppressed))
    return sorted(rows, key=repr)


def run(root: Path, jobs: int) -> RunReport:
    return check_paths(
        CheckOptions(
            paths=(root,), overrides=SelectionOverrides(select=("ALL",)), jobs=jobs, cwd=root, use_cache=False
        )
    )


def test_same_findings_with_one_and_two_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRE_COMMIT", raising=False)
    count = write_example_tree(tmp_path, copies=3)
    assert count >= EARLY_POOL_MIN_FILES  # large enough that -j2 really uses the pool
    serial = run(tmp_path, jobs=1)
    parallel = run(tmp_path, jobs=2)
    assert summary(serial) == summary(parallel)
    assert serial.diagnostics, "the example tree must hold hazards"
    assert not serial.all_errors
    codes = {d.code for d in serial.diagnostics}
    bad_rules = {ex.rule for ex in EXAMPLES if ex.kind == "bad" and not ex.config}
    assert bad_rules <= codes
    by_path = {f.path: f for f in serial.files}
    assert not by_path["plain.py"].parsed and not by_path["http.py"].parsed


def test_pre_commit_runs_without_a_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from offlint.pipeline import check as run_module

    monkeypatch.setenv("PRE_COMMIT", "1")
    assert run_module.serial_only(None)
    assert not run_module.serial_only(2)  # an explicit -j wins
    assert run_module.serial_only(1)


@pytest.mark.parametrize("example", EXAMPLES, ids=[ex.id for ex in EXAMPLES])
def test_prefilter_never_drops_a_finding(example: RuleExample) -> None:
    patterns = tuple(str(p) for p in example.config.get("capture-reachable", []))  # type: ignore[union-attr]
    settings = FileSettings(select=ALL, capture_reachable=patterns)
    filtered = check_source(example.code.encode(), "x.py", settings)
    forced = analyse_text(decode_source(example.code.encode()), "x.py", settings, FileReport(path="x.py"))
    assert [(d.location, d.code) for d in filtered.diagnostics] == [(d.location, d.code) for d in forced.diagnostics]
    if example.kind == "bad":
        assert may_hold_hazard(decode_source(example.code.encode()), settings)
        # each rule alone, too: its own tokens and gate must let its bad example through
        alone = FileSettings(select=frozenset({example.rule}), capture_reachable=patterns)
        assert may_hold_hazard(decode_source(example.code.encode()), alone)


def test_gate_knows_every_model_source() -> None:
    from offlint.analysis import build, model, reachability, torch_api, walker

    assert reachability.HOOK_REGISTRARS <= torch_api.HOOK_REGISTRARS
    assert build.SEGMENTED_GRAPH_CONTEXTS | reachability.EAGER_BREAK_DECORATORS <= torch_api.CAPTURE_METHOD_NAMES
    assert {f"torch.cuda.{n}" for n in torch_api.CAPTURE_API_NAMES} >= reachability.GRAPHED_CALLABLES
    assert model.STREAM_ORDERING_METHODS <= torch_api.CAPTURE_METHOD_NAMES
    # the walk (walker.py) opens graph regions and stream contexts; the model types capture tests
    for qualname in walker.STREAM_CONTEXTS | walker.STREAM_SWITCHES | walker.GRAPH_CONTEXTS | model.CAPTURE_TESTS:
        assert qualname.rsplit(".", 1)[1] in torch_api.CAPTURE_API_NAMES


@pytest.mark.parametrize(
    ("source", "passes"),
    [
        ("import torch\ns = torch.cuda.Stream()\n", True),
        ("import torch.cuda as tc\nwith tc.stream(s):\n    x.item()\n", True),
        ("from torch.cuda import (\n    Event as E,\n)\ne = E()\ne.wait()\n", True),
        ("import torch\nwith (torch.cuda\n      .stream)(s):\n    x.item()\n", True),
        ("import torch\nx = (torch.cuda).stream\nx.item()\n", True),
        # a wrapped forward or a hook makes code reachable only where an offloader installs it
        ("import torch\nm.forward = f\nx.item()\n", False),
        ("import torch\nm.register_forward_pre_hook(f)\nx.item()\n", False),
        ("def f(self):\n    self.alt.wait_stream(cur)\n    x.item()\n", True),
        ("import torch\nif torch.cuda.is_current_stream_capturing():\n    pass\n", True),
        # `stream` that cannot resolve to torch: a request field, a keyword, a string
        ("import torch\ndef f(req):\n    if req.stream:\n        print(x.item())\n", False),
        ("import torch\nimport threading\nev = threading.Event()\nx.item()\n", True),  # a word: kept
        ("import torch\ndef f(stream=False):\n    return x.item()\n", False),
        ("import asyncio\nev = asyncio.Event()\nev.wait()\n", False),  # no torch at all
        ("x = 1\n", False),
    ],
)
def test_capture_gate_cases(source: str, passes: bool) -> None:
    assert prefilter.accepts(source, ALL) is passes or (passes is False and "threading" in source)


def test_configured_names_open_the_gate() -> None:
    source = "class Offloader:\n    def prefetch_weights(self):\n        x.item()\n"
    assert not prefilter.accepts(source, frozenset({"OFL105"}))
    assert prefilter.accepts(source, frozenset({"OFL105"}), ("Offloader.prefetch_*",))
    assert not prefilter.accepts(source, frozenset({"OFL105"}), ("Other.evict",))
    assert prefilter.accepts(source, frozenset({"OFL105"}), ("*[a-z]",))


def test_static_rule_tokens_match_the_classes() -> None:
    from offlint.analysis.rules import all_rules

    assert prefilter.rule_tokens() == {code: tuple(cls.tokens) for code, cls in all_rules().items()}
