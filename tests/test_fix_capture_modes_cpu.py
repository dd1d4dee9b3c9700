"""`offlint probe --capture-mode` without a GPU: the option's plumbing (CLI flag, pyproject key,
scenario spec), its one-line errors, the split's layer list, and the fixed fixtures the GPU test
(tests/test_fix_capture_modes_gpu.py) drives under each mode, written where it reads them.

`python -m tests.test_fix_capture_modes_cpu DIR` writes `offlint fix`'s output for every case
into DIR (the GPU machine has no libcst: the fix is made here and travels).
"""

from __future__ import annotations

import contextlib
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.probing.errors import ProbeUsageError
from offlint.probing.options import CAPTURE_MODES, ProbeOptions, build_options
from offlint.probing.spec import ScenarioSpec
from tests.test_fix_gpu_entries_cpu import CASES, FixtureCase, fix_copy

# The fixed fixtures of the GPU run: the default strategy of each case.
STRATEGY = "auto"


def fixed_file(case: FixtureCase, folder: Path) -> Path:
    """Where `write_fixed(folder)` puts a case's fixed module (the GPU test reads it there)."""
    return folder / case.name / case.source.name


# the fixtures whose default fix (every capture mode named) leaves them as they were: their
# event hand-off is unsound under the split modes, and no rewrite sound under all of them fits
NOT_FIXED_UNDER_ALL_MODES = ("block_hook", "capture_hazards_zoo")


def write_fixed(folder: Path) -> list[Path]:
    """The default fix of each case (every capture mode named), where the GPU matrix reads it."""
    return [fix_copy(case, STRATEGY, folder / case.name, modes=None).path for case in CASES]


# --- the option ------------------------------------------------------------------------------


def test_capture_modes_are_the_four_the_issue_names() -> None:
    assert CAPTURE_MODES == ("whole", "pieces", "segmented-sglang", "segmented-vllm")
    assert ProbeOptions().capture_mode == "whole"


@pytest.mark.parametrize("mode", CAPTURE_MODES)
def test_the_flag_reaches_the_scenario_spec_and_survives_json(mode: str) -> None:
    options = build_options({"capture-mode": mode}, {})
    assert options.capture_mode == mode
    spec = ScenarioSpec.from_options("target", "x.py:Offloader", options)
    assert spec.capture_mode == mode
    assert ScenarioSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    assert ProbeOptions.from_json(options.to_json()).capture_mode == mode


def test_the_flag_is_case_blind_and_pyproject_spells_it_the_same() -> None:
    assert build_options({"capture-mode": " Pieces "}, {}).capture_mode == "pieces"
    assert build_options({}, {"capture-mode": "segmented-vllm"}).capture_mode == "segmented-vllm"
    # the command line beats pyproject
    given = build_options({"capture-mode": "whole"}, {"capture-mode": "pieces"})
    assert given.capture_mode == "whole"


def test_pyproject_key_is_read_and_checked(tmp_path: Path) -> None:
    from offlint.probing.options import read_pyproject_settings

    good = tmp_path / "good.toml"
    good.write_text('[tool.offlint.probe]\ncapture_mode = "segmented-sglang"\n', encoding="utf-8")
    assert read_pyproject_settings(good) == {"capture-mode": "segmented-sglang"}
    bad = tmp_path / "bad.toml"
    bad.write_text('[tool.offlint.probe]\ncapture-mode = "half"\n', encoding="utf-8")
    with pytest.raises(ProbeUsageError, match=r"capture-mode.*expected one of whole, pieces"):
        read_pyproject_settings(bad)


def test_an_unknown_mode_is_one_line_and_exit_2_before_any_gpu_work() -> None:
    result = CliRunner().invoke(main, ["probe", "--capture-mode", "halves", "x.py:Offloader"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        "offlint probe: error: --capture-mode: expected one of whole, pieces, "
        "segmented-sglang, segmented-vllm, got 'halves'"
    ]


def test_a_split_capture_of_a_compiled_forward_is_refused_in_one_line() -> None:
    result = CliRunner().invoke(
        main, ["probe", "--capture-mode", "pieces", "--compiled", "fullgraph", "x.py:Offloader"]
    )
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "offlint probe: error: --capture-mode pieces captures the eager forward: give it "
        "without --compiled"
    ]


def test_the_help_names_the_modes() -> None:
    result = CliRunner().invoke(main, ["probe", "--help"])
    assert result.exit_code == 0
    for mode in CAPTURE_MODES:
        assert mode in result.output


def test_the_scenario_spec_validates_its_mode() -> None:
    options = build_options({}, {})
    spec = ScenarioSpec.from_options("target", "x.py:Offloader", options)
    data = spec.to_json()
    with pytest.raises(ProbeUsageError, match="capture_mode: expected one of"):
        ScenarioSpec.from_json({**data, "capture_mode": "thirds"})
    with pytest.raises(ProbeUsageError, match="not --compiled"):
        ScenarioSpec.from_json({**data, "capture_mode": "pieces", "compiled": "fullgraph"})
    # a spec from a parent that predates the option is a whole capture
    data.pop("capture_mode")
    assert ScenarioSpec.from_json(data).capture_mode == "whole"


def test_bundled_scenarios_are_measured_not_judged_under_a_split_capture() -> None:
    from offlint.probing.runner import plan

    judged = plan(build_options({}, {}))
    measured = plan(build_options({"capture-mode": "pieces"}, {}))
    assert [p.name for p in judged] == [p.name for p in measured]
    assert all(p.expectation is not None for p in judged)
    assert all(p.expectation is None for p in measured)


# --- the split's layer list (torch on the CPU: no capture) ------------------------------------


def test_the_split_needs_a_layer_list_and_says_so_in_a_line() -> None:
    torch = pytest.importorskip("torch")
    from offlint.probing.capture_modes import layer_list
    from offlint.probing.model import build_stack

    weights = [torch.zeros(4, 4) for _ in range(8)]
    stack = build_stack(weights)
    assert layer_list(stack) == list(stack.layers)
    with pytest.raises(ProbeUsageError, match="no `layers` list of modules") as info:
        layer_list(torch.nn.Linear(4, 4))
    assert "\n" not in str(info.value)
    with pytest.raises(ProbeUsageError, match="has 1 layer"):
        layer_list(build_stack(weights[:1]))


# --- the split's sequence, dry-run on the CPU with CUDA's calls faked --------------------------


class _Log:
    events: ClassVar[list[str]] = []
    capturing: int | None = None  # the fake graph being captured
    graphs = 0
    members: ClassVar[set[str]] = (
        set()
    )  # the streams in that capture (forked into it, as CUDA has it)


class _FakeStream:
    def __init__(self, name: str = "side") -> None:
        self.name = name
        self.cuda_stream = id(self)

    def wait_stream(self, other: _FakeStream) -> None:
        _Log.events.append(f"{self.name}.wait_stream({other.name})")
        if _Log.capturing is not None and other.name in _Log.members:
            _Log.members.add(self.name)


class _FakeGraph:
    def __init__(self) -> None:
        _Log.graphs += 1
        self.number = _Log.graphs

    def capture_begin(self, pool: object = None) -> None:
        assert _Log.capturing is None
        _Log.capturing = self.number
        _Log.members = {"capture"}
        _Log.events.append(f"begin {self.number}")

    def capture_end(self) -> None:
        assert _Log.capturing == self.number
        _Log.capturing = None
        _Log.events.append(f"end {self.number}")

    def replay(self) -> None:
        _Log.events.append(f"replay {self.number}")


@pytest.fixture
def fake_capture(monkeypatch: pytest.MonkeyPatch) -> Any:
    torch = pytest.importorskip("torch")
    import offlint.probing.capture_modes as capture_modes

    _Log.events, _Log.capturing, _Log.graphs = [], None, 0
    capture_stream = _FakeStream("capture")
    outer = _FakeStream("outer")
    current = [outer]

    @contextlib.contextmanager
    def stream_context(stream: _FakeStream) -> Iterator[None]:
        was = current[0]
        current[0] = stream
        try:
            yield
        finally:
            current[0] = was

    def set_stream(stream: _FakeStream) -> None:
        current[0] = stream

    fake = types.SimpleNamespace(
        Stream=lambda: capture_stream,
        CUDAGraph=_FakeGraph,
        synchronize=lambda: None,
        empty_cache=lambda: None,
        current_stream=lambda: current[0],
        set_stream=set_stream,
        stream=stream_context,
        is_current_stream_capturing=lambda: (
            _Log.capturing is not None and current[0].name in _Log.members
        ),
    )
    monkeypatch.setattr(
        capture_modes, "torch", types.SimpleNamespace(cuda=fake, Tensor=torch.Tensor)
    )
    return torch


def _logged_stack(torch: Any) -> Any:
    from offlint.probing.model import build_stack

    stack = build_stack([torch.eye(4) for _ in range(8)])
    for index, layer in enumerate(stack.layers):

        def note(module: Any, args: Any, output: Any, index: int = index) -> None:
            where = f"in {_Log.capturing}" if _Log.capturing else "eager"
            _Log.events.append(f"layer {index} {where}")

        layer.register_forward_hook(note)
    return stack


def test_pieces_are_two_graphs_split_at_the_middle_layer_with_nothing_between(
    fake_capture: Any,
) -> None:
    from offlint.probing.capture_modes import capture_split

    torch = fake_capture
    stack = _logged_stack(torch)
    x = torch.ones(2, 4)
    split, output = capture_split("pieces", lambda: stack(x), list(stack.layers), None)
    assert torch.equal(output, stack(x))
    events = _Log.events[: _Log.events.index("outer.wait_stream(capture)") + 1]
    assert events == [
        "capture.wait_stream(outer)",
        "begin 1",
        *[f"layer {i} in 1" for i in range(4)],
        "end 1",
        "begin 2",
        *[f"layer {i} in 2" for i in range(4, 8)],
        "end 2",
        "outer.wait_stream(capture)",
    ]
    assert split.describe() == {"graphs": 2, "eager_breaks": 0}
    _Log.events.clear()
    split.replay()
    assert _Log.events == ["replay 1", "replay 2"]  # the hooks are gone: no layer runs


@pytest.mark.parametrize("mode", ["segmented-vllm", "segmented-sglang"])
def test_segments_run_the_middle_layer_eagerly_between_them_at_capture_and_replay(
    fake_capture: Any, mode: str
) -> None:
    from offlint.probing.capture_modes import capture_split

    torch = fake_capture
    stack = _logged_stack(torch)
    x = torch.ones(2, 4)
    split, _ = capture_split(mode, lambda: stack(x), list(stack.layers), None)
    assert _Log.events[1:12] == [
        "begin 1",
        *[f"layer {i} in 1" for i in range(4)],
        "end 1",
        "layer 4 eager",
        "begin 2",
        *[f"layer {i} in 2" for i in range(5, 8)],
    ]
    assert split.breaks == 1 and len(split.graphs) == 2
    _Log.events.clear()
    split.replay()
    assert _Log.events == ["replay 1", "layer 4 eager", "replay 2"]


def test_sglang_segments_join_wait_stream_forks_at_each_segment_end(fake_capture: Any) -> None:
    """A side stream forked in segment 1 (`side.wait_stream(capturing)`) and never joined is
    joined by the capture at segment 1's end; vLLM's segments leave it."""
    from offlint.probing.capture_modes import capture_split

    torch = fake_capture
    stack = _logged_stack(torch)
    side = _FakeStream("side")

    def fork(module: Any, args: Any, output: Any) -> None:
        side.wait_stream(fake_torch_current())

    import offlint.probing.capture_modes as capture_modes

    def fake_torch_current() -> Any:
        return capture_modes.torch.cuda.current_stream()

    stack.layers[1].register_forward_hook(fork)
    x = torch.ones(2, 4)
    for mode, joined in (("segmented-sglang", [1, 0]), ("segmented-vllm", None)):
        _Log.events.clear()
        split, _ = capture_split(mode, lambda: stack(x), list(stack.layers), None)
        end_1 = next(i for i, event in enumerate(_Log.events) if event.startswith("end "))
        if joined is None:
            assert "capture.wait_stream(side)" not in _Log.events, _Log.events
            assert "joins_at_segment_end" not in split.describe()
        else:
            assert _Log.events[end_1 - 1] == "capture.wait_stream(side)", _Log.events
            assert split.describe()["joins_at_segment_end"] == joined
        # the hook is lifted: a wait_stream after the capture is the stream's own
        assert _FakeStream.wait_stream.__name__ == "wait_stream"
        assert "hooked" not in repr(_FakeStream.wait_stream)


# --- what the GPU run reads ----------------------------------------------------------------------


def test_fixed_files_are_written_where_the_gpu_test_reads_them(tmp_path: Path) -> None:
    written = write_fixed(tmp_path)
    assert written == [fixed_file(case, tmp_path) for case in CASES]
    for case, path in zip(CASES, written, strict=True):
        changed = path.read_text(encoding="utf-8") != case.source.read_text(encoding="utf-8")
        assert changed == (case.name not in NOT_FIXED_UNDER_ALL_MODES), case.name


if __name__ == "__main__":
    for path in write_fixed(Path(sys.argv[1])):
        print(path)
