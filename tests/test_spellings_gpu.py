"""The GPU oracle for issue 24's spellings (benchmarks/spellings_oracle.py): each fact the
checker learned is run on a GPU, one case a process, and must agree with the claim. Without
CUDA the GPU cases skip; the committed measurement is checked on the CPU: it exists, is
well-formed, covers every case, and names any case where the GPU disagreed with a rule."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.spellings_oracle import BY_NAME, CASES, run_case_in_subprocess

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
SPELLINGS = REPO / "tests" / "data" / "spellings"
MEASURED = RESULTS / "spellings-oracle-h200-2026-12-05.json"
OUTCOMES = {"ok", "silent-missing", "wrong", "pinned-copy-error", "other"} | {
    f"cuda:{n}" for n in (900, 901, 904, 905, 906, 907)
}


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_case_agrees_on_gpu(name: str) -> None:
    record, output = run_case_in_subprocess(name)
    assert record["agrees"], (
        f"{name}: claimed {record['claim']!r}, measured {record['outcome']!r}\n{output[-2000:]}"
    )


def _measured() -> dict[str, Any]:
    assert MEASURED.is_file(), f"{MEASURED} missing: run benchmarks/spellings_oracle.py on a GPU"
    data: dict[str, Any] = json.loads(MEASURED.read_text(encoding="utf-8"))
    return data


def test_committed_measurement_is_well_formed() -> None:
    data = _measured()
    for key in ("date", "gpu", "torch", "cuda", "cases"):
        assert data.get(key), key
    assert "H200" in data["gpu"]
    names = [record["name"] for record in data["cases"]]
    assert names == [case.name for case in CASES], "the JSON and the script's cases differ"
    for record in data["cases"]:
        case = BY_NAME[record["name"]]
        assert record["claim_codes"] == list(case.claim_codes)
        assert record["expected_outcomes"] == sorted(case.expected)
        assert record["outcome"] in OUTCOMES, record
        assert isinstance(record["capture_ok"], bool), record
        # agreement is recomputed, not trusted
        assert record["agrees"] == (record["outcome"] in case.expected), record["name"]
        if not record["capture_ok"]:
            assert record["error"]["messages"], record["name"]


def test_every_measured_case_agrees_with_its_claim() -> None:
    disagreeing = [
        f"{r['name']}: claimed {r['claim_codes'] or 'clean'}, measured {r['outcome']}"
        for r in _measured()["cases"]
        if not r["agrees"]
    ]
    assert not disagreeing, "a rule disagrees with the GPU: " + "; ".join(disagreeing)


def test_claims_are_the_spelling_files_markers() -> None:
    """A case's claim is (a subset of) what its spelling file's `# expect:` markers say, so
    the oracle measures what the checker is tested to report."""
    for case in CASES:
        if case.file is None:
            continue
        text = (SPELLINGS / case.file).read_text(encoding="utf-8")
        markers = set(re.findall(r"# expect: (OFL\d{3})", text))
        assert set(case.claim_codes) <= markers, (case.name, markers)
        if not markers:
            assert case.claim_codes == (), case.name
