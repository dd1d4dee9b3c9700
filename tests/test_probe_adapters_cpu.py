"""The library adapters (offlint/probing/adapters/) where the library is missing: one line,
exit 2, no traceback, from `python -m` and from `build()` alike (as `offlint probe --entry`
reports it). The import is made to fail with a `sys.modules` entry of None, the way Python
itself marks a module that cannot be imported; nothing of torch is mocked."""

from __future__ import annotations

import subprocess
import sys

import pytest

from offlint.probing.adapters import accelerate_cpu_offload, diffusers_group_offload
from offlint.probing.adapters._library import LibraryMissing, import_library
from offlint.probing.adapters._lifecycle import main, summary

ADAPTERS = [
    (diffusers_group_offload, "diffusers", ("diffusers", "diffusers.hooks")),
    (accelerate_cpu_offload, "accelerate", ("accelerate",)),
]


def _hide(monkeypatch: pytest.MonkeyPatch, modules: tuple[str, ...]) -> None:
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize(("adapter", "library", "modules"), ADAPTERS)
def test_main_says_library_missing_in_one_line(
    adapter: object,
    library: str,
    modules: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _hide(monkeypatch, modules)
    code = main(adapter.ADAPTER, [])  # type: ignore[attr-defined]
    out, err = capsys.readouterr()
    assert code == 2
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    assert f"{library} is not importable here" in lines[0]
    assert f"pip install {library}" in lines[0]
    assert "Traceback" not in out + err


@pytest.mark.parametrize(("adapter", "library", "modules"), ADAPTERS)
def test_build_raises_one_line_library_missing(
    adapter: object, library: str, modules: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide(monkeypatch, modules)
    with pytest.raises(LibraryMissing) as raised:
        adapter.build()  # type: ignore[attr-defined]
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{library} is not importable here")
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_library_error_at_import_is_one_line_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # a library that is installed but fails at its own import (a version clash, say)
    import types

    broken = types.ModuleType("offlint_test_broken_library")

    def fail(name: str) -> None:
        raise RuntimeError("Failed to import diffusers.hooks because of the following error:\nX")

    monkeypatch.setattr("importlib.import_module", fail)
    with pytest.raises(LibraryMissing) as raised:
        import_library(broken.__name__, "diffusers")
    assert str(raised.value).count("\n") == 0
    assert "RuntimeError: Failed to import diffusers.hooks" in str(raised.value)


@pytest.mark.parametrize(
    ("module", "library"),
    [
        ("offlint.probing.adapters.diffusers_group_offload", "diffusers"),
        ("offlint.probing.adapters.accelerate_cpu_offload", "accelerate"),
    ],
)
def test_python_dash_m_without_the_library(module: str, library: str) -> None:
    # A child interpreter where the library is hidden the same way, run as a user runs it.
    code = (
        f"import sys; sys.modules[{library!r}] = None; sys.modules[{library + '.hooks'!r}] = None;"
        f"import runpy; sys.argv = [{module!r}];"
        f"runpy.run_module({module!r}, run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout.count("\n") == 1
    assert f"{library} is not importable here" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_unknown_variant_is_refused_by_argparse() -> None:
    with pytest.raises(SystemExit) as raised:
        main(diffusers_group_offload.ADAPTER, ["--variant", "nonsense"])
    assert raised.value.code == 2


def test_variants_cover_ground_truth_setups() -> None:
    setups = diffusers_group_offload.SETUPS
    assert setups["outside"] == ("block_level", False, False, True)
    assert setups["block-stream"] == ("block_level", True, False, False)
    assert setups["leaf-stream"] == ("leaf_level", True, False, False)
    assert set(accelerate_cpu_offload.VARIANTS) == {"blocks", "outside"}


def test_summary_names_the_library_line() -> None:
    line = {"file": "/x/diffusers/hooks/group_offloading.py", "line": 279, "code": "s.sync()"}
    result = {
        "variant": "leaf-stream",
        "eager": [{"rel_err": 0.0, "exact": True}],
        "capture": {
            "ok": False,
            "root": {
                "cuda_code": 900,
                "message": "operation not permitted when stream is capturing",
            },
            "library_lines": [line],
        },
        "sanitizer": [{"rule": "OFL105", "library_lines": [line]}],
    }
    text = summary(result)
    assert "eager exact" in text
    assert "capture failed: 900 operation not permitted" in text
    assert "sanitizer OFL105 at /x/diffusers/hooks/group_offloading.py:279" in text
    assert summary({"variant": "v", "error": "timed out after 150 s"}) == (
        "v: could not run: timed out after 150 s"
    )
