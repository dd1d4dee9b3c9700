"""How surely capture reaches a finding (shared/CATALOGUE.md): high from capture regions, capture
tests and configuration; medium on the forward path of offloader-style code; low elsewhere in a
stream-holding class; nothing in constructors and capture drivers. Both front ends agree."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.diagnostics import Confidence

ALL = frozenset(load_catalogue())
FRONT_ENDS = pytest.mark.parametrize("front_end", ["skeleton", "libcst"])


def found(source: str, front_end: str, floor: Confidence = Confidence.LOW) -> list[tuple[int, str, str]]:
    settings = FileSettings(select=ALL, front_end=front_end, min_confidence=floor)
    report = check_source(textwrap.dedent(source).encode(), "case.py", settings)
    assert not report.errors
    return [(d.location.line, d.code, d.confidence.value) for d in report.diagnostics if d.confidence.at_least(floor)]


@FRONT_ENDS
def test_the_three_tiers(front_end: str) -> None:
    source = """\
        import torch
        from torch import nn


        def step(x):
            return x.sum().item()


        def capture(model, x):
            g = torch.cuda.CUDAGraph()
            torch.cuda.synchronize()  # the driver's own set-up: not in the capture
            with torch.cuda.graph(g):
                step(x)
            return g


        class Offloader(nn.Module):
            def __init__(self):
                super().__init__()
                self.stream = torch.cuda.Stream()
                self.stream.synchronize()  # constructors never run in a capture

            def forward(self, x):
                return x.cpu()

            def schedule(self, x):
                return x.tolist()
        """
    assert found(source, front_end) == [
        (6, "OFL105", "high"),  # called inside torch.cuda.graph(...)
        (24, "OFL105", "medium"),  # the forward path of a stream-holding module
        (27, "OFL105", "low"),  # any other method of it
    ]


@FRONT_ENDS
def test_a_plain_class_call_is_no_forward_path(front_end: str) -> None:
    source = """\
        import torch


        class GraphRunner:
            def __init__(self):
                self.stream = torch.cuda.Stream()

            def __call__(self, x):
                torch.cuda.synchronize()
                return x
        """
    assert found(source, front_end) == [(9, "OFL105", "low")]
    assert found(source, front_end, Confidence.MEDIUM) == []


@FRONT_ENDS
def test_an_assertion_of_not_capturing_guards_what_follows(front_end: str) -> None:
    source = """\
        import torch


        def register(self):
            assert not torch.cuda.is_current_stream_capturing(), "register after the capture"
            torch.cuda.synchronize()


        def during(x):
            assert torch.cuda.is_current_stream_capturing()
            return x.item()
        """
    assert found(source, front_end) == [(11, "OFL105", "high")]


@FRONT_ENDS
def test_eager_breaks_of_a_segmented_capture(front_end: str) -> None:
    source = """\
        import torch
        from sglang.srt.model_executor.runner_backend_utils import eager_on_graph


        class Attention(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.side = torch.cuda.Stream()

            @eager_on_graph(True)
            def attend(self, q):
                n = int(q.max().item())  # legal: it runs between two captured segments
                self.side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.side):
                    out = q * n
                return out  # the side stream is never joined before the next segment

            def forward(self, q):
                return self.attend(q)
        """
    assert found(source, front_end, Confidence.MEDIUM) == [(13, "OFL103", "medium")]


@FRONT_ENDS
def test_segmented_capture_regions_and_graphed_callables_are_high(front_end: str) -> None:
    source = """\
        import torch
        from vllm.compilation.breakable import BreakableCUDAGraphCapture


        def body(x):
            return x.tolist()


        def layer(x):
            return x.cpu()


        def capture(graph, x):
            with BreakableCUDAGraphCapture(graph):
                body(x)
            return torch.cuda.make_graphed_callables(layer, (x,))
        """
    assert found(source, front_end, Confidence.HIGH) == [(6, "OFL105", "high"), (10, "OFL105", "high")]


def test_min_confidence_on_the_command_line_and_in_config(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        textwrap.dedent(
            """\
            import torch


            class Pool:
                def __init__(self):
                    self.stream = torch.cuda.Stream()

                def free(self, x):
                    return x.item()
            """
        )
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "offlint", "check", "--no-cache", "--output-format", "concise", *args, "m.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )

    default = run()
    assert (default.returncode, default.stdout) == (0, "")
    assert "1 finding below the confidence floor not shown" in default.stderr
    shown = run("--min-confidence", "low")
    assert shown.returncode == 1
    assert shown.stdout.rstrip().endswith("[low]")
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\nmin-confidence = "low"\n')
    assert run().returncode == 1
    assert run("--min-confidence", "high").returncode == 0
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\nmin-confidence = "sure"\n')
    bad = run()
    assert bad.returncode == 2
    assert "min-confidence must be one of high, medium, low" in bad.stderr


def test_sglangs_offloaders_are_reported_at_the_default_floor() -> None:
    """The pre-fix offloader's 905 (`_load_event.wait()`, reached through the hooks the offloader
    hands to the forward it installs, a lambda among them) and the merged fix's OFL201 show by
    default."""
    fixtures = Path(__file__).resolve().parent.parent / "fixtures"

    def default(name: str) -> list[tuple[int, str]]:
        settings = FileSettings(select=ALL)
        report = check_source((fixtures / name).read_bytes(), name, settings)
        return [(d.location.line, d.code) for d in report.diagnostics if d.confidence.at_least(settings.min_confidence)]

    assert default("sglang_offloader_original.py") == [(149, "OFL103"), (161, "OFL101")]
    assert (171, "OFL201") in default("sglang_offloader_inline.py")


@FRONT_ENDS
def test_a_wait_on_an_event_the_caller_hands_in_is_unsure(front_end: str) -> None:
    """`ready` comes from the caller: whether it was recorded before the capture is the caller's
    to say, so OFL101 is low there; an event kept on self is not."""
    source = """\
        import torch


        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.done = torch.cuda.Event()

            def forward(self, x, ready: torch.cuda.Event):
                torch.cuda.current_stream().wait_event(ready)
                self.done.wait()
                return x
        """
    assert [f for f in found(source, front_end) if f[1] == "OFL101"] == [
        (10, "OFL101", "low"),
        (11, "OFL101", "medium"),
    ]


@FRONT_ENDS
def test_code_that_runs_only_with_graphs_off_is_not_reached(front_end: str) -> None:
    """DeepSpeed registers its profiling hooks only when `enable_cuda_graph` is off; vLLM's
    `enforce_eager` paths likewise never meet a capture."""
    source = """\
        import torch


        class Engine(torch.nn.Module):
            def __init__(self, config):
                super().__init__()
                self.stream = torch.cuda.Stream()
                if not config.enable_cuda_graph:
                    self.register_forward_pre_hook(self._profile)
                self.register_forward_hook(self._always)

            def _profile(self, module, inputs):
                torch.cuda.synchronize()

            def _always(self, module, inputs, output):
                torch.cuda.synchronize()

            def forward(self, x, config):
                if config.enforce_eager:
                    self._debug(x)
                return x

            def _debug(self, x):
                return x.sum().item()
        """
    assert found(source, front_end, Confidence.MEDIUM) == [(16, "OFL105", "medium")]


@FRONT_ENDS
def test_a_capture_guard_shows_its_function_runs_in_capture(front_end: str) -> None:
    """A forward that skips host syncs while capturing runs under capture: what the guard leaves
    unprotected there (and in what it calls) is reported at medium; deeper callees at low; a
    function whose capture test raises says it never runs in one; a placement test is no sign."""
    source = """\
        import torch
        from torch import nn


        class Model(nn.Module):
            def _collect(self, loc):
                self._deep(loc)
                return int(loc[0].item())

            def _deep(self, loc):
                return loc.tolist()

            def forward(self, x, loc):
                capturing = torch.cuda.is_current_stream_capturing()
                start = self._collect(loc)
                if not capturing:
                    print(int(x.sum().item()))
                return x[start:]


        def prepare(flag, device):
            if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                raise RuntimeError("not graph capturable")
            return bool(flag.item())


        def to_host(t):
            if t.device.type == "cpu":
                return t
            return t.to("cpu", non_blocking=True)
        """
    assert found(source, front_end) == [(8, "OFL105", "medium"), (11, "OFL105", "low")]
