"""The pytest plugin of the capture sanitizer, without a GPU: it loads (by `-p` and through the
`pytest11` entry point pyproject declares), adds its option and marker, leaves unmarked tests
alone, puts torch back as it found it, and refuses a bad mode."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
PLUGIN = "offlint.probing.pytest_plugin"


def _installed() -> bool:
    return any(ep.value == PLUGIN for ep in importlib.metadata.entry_points(group="pytest11"))


def plugin_args() -> list[str]:
    """`-p` the plugin unless the installed entry point loads it already (twice is an error)."""
    return [] if _installed() else ["-p", PLUGIN]


def _pytest(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_subject.py").write_text(textwrap.dedent(body))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_pyproject_registers_the_plugin_as_a_pytest11_entry_point() -> None:
    document = tomllib.loads((REPO / "pyproject.toml").read_text())
    entry_points = document["project"]["entry-points"]["pytest11"]
    assert entry_points == {"offlint": PLUGIN}
    module = __import__(PLUGIN, fromlist=["pytest_runtest_call"])
    assert callable(module.pytest_runtest_call) and callable(module.pytest_addoption)
    plot = document["project"]["optional-dependencies"]["plot"]
    assert any(requirement.startswith("matplotlib") for requirement in plot)


def test_the_installed_entry_point_loads_the_plugin(tmp_path: Path) -> None:
    if not _installed():
        pytest.skip("offlint is installed without the pytest11 entry point: reinstall it")
    completed = _pytest(tmp_path, "def test_nothing():\n    pass\n", "--help")
    assert "--capture-sanitizer" in completed.stdout


def test_option_and_marker_are_declared(tmp_path: Path) -> None:
    completed = _pytest(tmp_path, "def test_nothing():\n    pass\n", *plugin_args(), "--markers")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "@pytest.mark.capture_sanitizer(mode='raise', races=False)" in completed.stdout
    completed = _pytest(tmp_path, "def test_nothing():\n    pass\n", *plugin_args(), "--help")
    assert "--capture-sanitizer" in completed.stdout
    assert "--capture-sanitizer-races" in completed.stdout


def test_a_marked_test_runs_under_the_sanitizer_and_torch_is_restored(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    body = """\
        import pytest
        import torch

        ORIGINAL = torch.cuda.Event.wait

        @pytest.mark.capture_sanitizer
        def test_marked():
            assert torch.cuda.Event.wait is not ORIGINAL  # patched while the test runs
            assert torch.ones(2).sum().item() == 2.0  # eager CPU work is untouched

        def test_unmarked_after():
            assert torch.cuda.Event.wait is ORIGINAL

        def test_fixture(capture_sanitizer):
            assert capture_sanitizer.mode == "record"
            assert capture_sanitizer.violations == []
            assert torch.cuda.Event.wait is not ORIGINAL
        """
    completed = _pytest(tmp_path, body, *plugin_args())
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "3 passed" in completed.stdout


def test_a_bad_mode_is_a_usage_error(tmp_path: Path) -> None:
    body = """\
        import pytest

        @pytest.mark.capture_sanitizer(mode="loud")
        def test_marked():
            pass
        """
    completed = _pytest(tmp_path, body, *plugin_args())
    assert completed.returncode != 0
    assert "is 'raise' or 'record', not 'loud'" in completed.stdout + completed.stderr


def test_races_turn_on_pytorchs_cuda_sanitizer_only_where_asked(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    body = """\
        import pytest
        import torch
        from torch.cuda import _sanitizer as csan

        # (no tensor op while CSAN is on: this machine may have no CUDA device)

        @pytest.mark.capture_sanitizer(races=True)
        def test_marked_with_races():
            assert csan.cuda_sanitizer.enabled

        @pytest.mark.capture_sanitizer
        def test_marked_without():
            assert not csan.cuda_sanitizer.enabled

        def test_fixture(capture_sanitizer):
            assert capture_sanitizer.races is RACES_OPTION
        """
    completed = _pytest(tmp_path, body.replace("RACES_OPTION", "False"), *plugin_args())
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "3 passed" in completed.stdout
    # the option turns races on for every sanitized test, the fixture's included
    body = body.replace("RACES_OPTION", "True").replace(
        "assert not csan.cuda_sanitizer.enabled", "assert csan.cuda_sanitizer.enabled"
    )
    completed = _pytest(tmp_path, body, *plugin_args(), "--capture-sanitizer-races")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "3 passed" in completed.stdout
