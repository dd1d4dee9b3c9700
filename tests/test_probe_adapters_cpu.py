"""The library adapters (offlint/probing/adapters/) where the library is missing: one line,
exit 2, no traceback, from `python -m` and from `build()` alike (as `offlint probe --entry`
reports it). The import is made to fail with a `sys.modules` entry of None, the way Python
itself marks a module that cannot be imported; nothing of torch is mocked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from offlint.probing.adapters import (
    accelerate_cpu_offload,
    diffusers_group_offload,
    sglang_offloader_v2,
)
from offlint.probing.adapters._library import LibraryMissing, import_library
from offlint.probing.adapters._lifecycle import main, summary

REPO_ROOT = Path(__file__).resolve().parent.parent

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


# SGLang's real OffloaderV2 (offlint/probing/adapters/sglang_offloader_v2.py): where
# `sglang.srt.utils.offloader` cannot be imported, one line names the missing module and the
# module that imported it. A small package tree on disk makes the import fail for real (a
# ModuleNotFoundError from Python's import system); it shadows any installed sglang because it is
# first on the path. No network, no GPU.

SGLANG_MODULE = "offlint.probing.adapters.sglang_offloader_v2"
ABSENT = "offlint_test_absent_dependency"
LIBRARY_WHEEL = sorted(
    (Path.home() / ".cache" / "offlint-trees" / "downloads").glob("sglang-*.whl")
)


def _sglang_tree(root: Path, common: str) -> Path:
    """sglang/srt/utils/{__init__,common,offloader}.py, laid out (and importing one another) as
    in sglang, with `common` as common.py's body."""
    files = {
        "sglang/__init__.py": "",
        "sglang/srt/__init__.py": "",
        "sglang/srt/utils/__init__.py": "from sglang.srt.utils.common import *  # noqa\n",
        "sglang/srt/utils/common.py": common,
        "sglang/srt/utils/offloader.py": "from sglang.srt.utils import common  # noqa\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def sglang_modules_restored() -> Iterator[None]:
    """Whatever sglang modules an in-process import leaves in sys.modules are dropped again."""
    before = {name: module for name, module in sys.modules.items() if name.startswith("sglang")}
    yield
    for name in [name for name in sys.modules if name.startswith("sglang")]:
        del sys.modules[name]
    sys.modules.update(before)


def _run_adapter(pythonpath: str, *interpreter_flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run(
        [sys.executable, *interpreter_flags, "-m", SGLANG_MODULE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_sglang_missing_dependency_is_named_in_one_line(tmp_path: Path) -> None:
    tree = _sglang_tree(tmp_path, f"import {ABSENT}\n")
    done = _run_adapter(f"{tree}{os.pathsep}{REPO_ROOT}")
    assert done.returncode == 2, done.stderr
    assert done.stdout == (
        f"{SGLANG_MODULE}: sglang.srt.utils.offloader is not importable here: "
        f"{ABSENT} is missing (needed by sglang.srt.utils.common)\n"
    )
    assert "Traceback" not in done.stdout + done.stderr


def test_sglang_not_installed_is_named_in_one_line() -> None:
    # -S: no site-packages, so no sglang whatever this machine has installed
    done = _run_adapter(str(REPO_ROOT), "-S")
    assert done.returncode == 2, done.stderr
    assert done.stdout == (
        f"{SGLANG_MODULE}: sglang.srt.utils.offloader is not importable here: "
        f"sglang is missing (needed by {SGLANG_MODULE})\n"
    )
    assert "Traceback" not in done.stdout + done.stderr


def test_sglang_build_raises_the_same_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sglang_modules_restored: None
) -> None:
    for name in [name for name in sys.modules if name.startswith("sglang")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(_sglang_tree(tmp_path, f"import {ABSENT}\n")))
    with pytest.raises(LibraryMissing) as raised:
        sglang_offloader_v2.build()
    assert str(raised.value) == (
        "sglang.srt.utils.offloader is not importable here: "
        f"{ABSENT} is missing (needed by sglang.srt.utils.common)"
    )
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_sglang_error_at_import_is_one_line_with_its_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sglang_modules_restored: None
) -> None:
    # installed, but failing in its own code (a version clash, say)
    for name in [name for name in sys.modules if name.startswith("sglang")]:
        monkeypatch.delitem(sys.modules, name)
    common = 'raise RuntimeError("needs torch>=9\\nsecond line")\n'
    monkeypatch.syspath_prepend(str(_sglang_tree(tmp_path, common)))
    with pytest.raises(LibraryMissing) as raised:
        sglang_offloader_v2.import_offloader()
    assert str(raised.value) == (
        "sglang.srt.utils.offloader is not importable here: "
        "RuntimeError: needs torch>=9 (in sglang.srt.utils.common)"
    )


@pytest.mark.skipif(not LIBRARY_WHEEL, reason="no sglang wheel in ~/.cache/offlint-trees")
def test_real_sglang_wheel_names_its_first_missing_dependency() -> None:
    # The released wheel itself on the path (Python imports a wheel's pure-Python modules
    # from the zip): its import chain stops at the first dependency this interpreter lacks.
    done = _run_adapter(f"{LIBRARY_WHEEL[-1]}{os.pathsep}{REPO_ROOT}")
    lines = done.stdout.splitlines()
    if done.returncode == 0 or "no CUDA device" in done.stdout:
        pytest.skip("every dependency of sglang's offloader is installed here")
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stdout
    assert re.fullmatch(
        rf"{re.escape(SGLANG_MODULE)}: sglang\.srt\.utils\.offloader is not importable here: "
        r"[\w.]+ is missing \(needed by sglang\.[\w.]+\)",
        lines[0],
    ), lines[0]
    assert "Traceback" not in done.stdout + done.stderr


def test_sglang_adapter_is_an_entry_name_and_imports_nothing_of_sglang() -> None:
    from offlint.probing.entry import check_build_arguments, load_entry, resolve_entry_spec

    spec = resolve_entry_spec("sglang-offloader-v2")
    assert spec == f"{SGLANG_MODULE}:build"
    assert resolve_entry_spec("diffusers-group-offload").endswith("diffusers_group_offload:build")
    before = {name for name in sys.modules if name.startswith("sglang")}
    entry = load_entry(spec)
    check_build_arguments(entry, {"variant": "cpu-prefetch-2", "layers": 8})
    assert {name for name in sys.modules if name.startswith("sglang")} == before
    assert set(sglang_offloader_v2.ADAPTER.variants) == {"cpu", "cpu-prefetch-2"}
    assert "prefetch_step=2" in sglang_offloader_v2.ADAPTER.variants["cpu-prefetch-2"]
