"""The library adapters on a real GPU with the real libraries: each failure of
shared/GROUND-TRUTH.md §3 named with its line inside diffusers/accelerate and its cause.

Each adapter's variants run once per module (each in its own process, as `python -m` runs them);
with OFFLINT_ADAPTERS_RECORD=DIR the results are also written there as JSON (the committed
benchmarks/results/adapters-h200-*.json come from that)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from offlint.probing.adapters._lifecycle import Adapter, run_in_child, summary  # noqa: E402

PINNED = "Cannot copy between CPU and CUDA tensors during CUDA graph capture"


def _run(adapter: Adapter, variants: list[str], csan: bool, record: str) -> dict[str, Any]:
    results = {v: run_in_child(adapter, v, csan) for v in variants}
    for result in results.values():
        print(summary(result))
    directory = os.environ.get("OFFLINT_ADAPTERS_RECORD")
    if directory:
        Path(directory, f"{record}.json").write_text(json.dumps(list(results.values()), indent=2))
    return results


def _needs(library: str) -> None:
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed")


@pytest.fixture(scope="module")
def diffusers_results() -> dict[str, Any]:
    _needs("diffusers")
    from offlint.probing.adapters.diffusers_group_offload import ADAPTER

    return _run(ADAPTER, list(ADAPTER.variants), csan=False, record="diffusers")


@pytest.fixture(scope="module")
def diffusers_csan() -> dict[str, Any]:
    _needs("diffusers")
    from offlint.probing.adapters.diffusers_group_offload import ADAPTER

    return _run(ADAPTER, ["block-stream", "leaf-stream"], csan=True, record="diffusers-csan")


@pytest.fixture(scope="module")
def accelerate_results() -> dict[str, Any]:
    _needs("accelerate")
    from offlint.probing.adapters.accelerate_cpu_offload import ADAPTER

    return _run(ADAPTER, list(ADAPTER.variants), csan=False, record="accelerate")


def _first_line(result: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in result, result["error"]
    lines = result["capture"]["library_lines"]
    assert lines, result["capture"]
    return lines[0]


def _rules(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The first violation of each rule (a rule can fire at several lines)."""
    first: dict[str, dict[str, Any]] = {}
    for violation in result["sanitizer"]:
        first.setdefault(violation["rule"], violation)
    return first


@pytest.mark.parametrize("variant", ["blocks", "outside"])
def test_accelerate_pageable_copy_at_set_module_tensor_to_device(
    accelerate_results: dict[str, Any], variant: str
) -> None:
    result = accelerate_results[variant]
    assert all(step["exact"] for step in result["eager"])
    assert not result["capture"]["ok"]
    assert PINNED in result["capture"]["root"]["message"]
    line = _first_line(result)
    assert line["file"].endswith("accelerate/utils/modeling.py")
    assert line["function"] == "set_module_tensor_to_device"
    assert ".to(device" in line["code"]
    ofl106 = _rules(result)["OFL106"]
    assert ofl106["library_lines"][0]["function"] == "set_module_tensor_to_device"


@pytest.mark.parametrize("variant", ["outside", "outside-stream"])
def test_diffusers_outside_layer_pageable_copy_at_transfer(
    diffusers_results: dict[str, Any], variant: str
) -> None:
    result = diffusers_results[variant]
    assert all(step["exact"] for step in result["eager"])
    assert PINNED in result["capture"]["root"]["message"]
    line = _first_line(result)
    assert line["file"].endswith("diffusers/hooks/group_offloading.py")
    assert line["function"] == "_transfer_tensor_to_device"
    assert "source_tensor.to(" in line["code"]
    assert _rules(result)["OFL106"]["library_lines"][0]["function"] == "_transfer_tensor_to_device"


@pytest.mark.parametrize("variant", ["leaf-stream", "block-stream"])
def test_diffusers_stream_synchronize_in_capture_named(
    diffusers_results: dict[str, Any], variant: str
) -> None:
    result = diffusers_results[variant]
    assert not result["capture"]["ok"]
    codes = {link["cuda_code"] for link in result["capture"]["chain"]}
    assert 900 in codes, result["capture"]["chain"]
    ofl105 = _rules(result)["OFL105"]
    line = ofl105["library_lines"][0]
    assert line["file"].endswith("diffusers/hooks/group_offloading.py")
    assert line["function"] == "_onload_from_memory"
    assert "self.stream.synchronize()" in line["code"]


def test_diffusers_block_stream_eager_is_wrong(diffusers_results: dict[str, Any]) -> None:
    wrong = diffusers_results["block-stream"]["eager"]
    assert max(step["rel_err"] for step in wrong) > 0.1, wrong
    for exact_variant in ("leaf-stream", "outside", "outside-stream"):
        assert all(s["exact"] for s in diffusers_results[exact_variant]["eager"]), exact_variant


def test_diffusers_block_stream_race_named_by_csan(diffusers_csan: dict[str, Any]) -> None:
    races = diffusers_csan["block-stream"]["csan"]["races"]
    assert races, diffusers_csan["block-stream"]
    previous = races[0]["previous"]
    assert previous["access"] == "writing to"
    assert previous["library_lines"][0]["function"] == "_transfer_tensor_to_device"
    assert races[0]["current"]["stream"] != previous["stream"]
